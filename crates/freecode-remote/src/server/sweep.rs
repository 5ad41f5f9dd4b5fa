//! The sweeper: periodically removes expired shares, and orphaned blobs whose upload never
//! committed a record.
//!
//! Safe to run on every replica at once: records are immutable and removal of something
//! already gone is not an error, so replicas racing on one share just both succeed.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use crate::blob::{BlobStore, ShareCode};

use super::record::{ShareRecord, now_ms};
use super::redact::redacted;

/// How old a blob without a record (or a temporary file) must be before it is garbage: well
/// past the time any upload takes between writing its blob and its record.
pub(crate) const ORPHAN_GRACE: Duration = Duration::from_secs(3600);

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SweepStats {
    /// Records seen.
    pub records: usize,
    /// Expired shares removed.
    pub expired: usize,
    /// Orphaned blobs and stale temporary files removed.
    pub orphans: usize,
    /// Failures (logged one by one).
    pub errors: usize,
}

/// The sweeper's memory between runs: each listed share's expiry. Records never change, so a
/// cached expiry stays right for as long as the record is listed; this saves reading every
/// record on every sweep. Correctness never depends on it.
#[derive(Debug, Default)]
pub(crate) struct Sweeper {
    expiries: HashMap<ShareCode, u64>,
}

impl Sweeper {
    /// Runs forever, one sweep per `interval` (the first right away).
    pub async fn run(mut self, store: BlobStore, interval: Duration) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let started = std::time::Instant::now();
            let stats = self.sweep_once(&store).await;
            let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            if stats.expired + stats.orphans + stats.errors > 0 {
                tracing::info!(
                    records = stats.records,
                    expired = stats.expired,
                    orphans = stats.orphans,
                    errors = stats.errors,
                    latency_ms,
                    "sweep"
                );
            } else {
                tracing::debug!(records = stats.records, latency_ms, "sweep: nothing to do");
            }
        }
    }

    /// One pass over the store.
    pub async fn sweep_once(&mut self, store: &BlobStore) -> SweepStats {
        let mut stats = SweepStats::default();
        let codes = match store.list_records().await {
            Ok(codes) => codes,
            Err(error) => {
                tracing::warn!(error = %redacted(&error), "sweep: listing records failed");
                stats.errors += 1;
                return stats;
            }
        };
        stats.records = codes.len();
        let listed: HashSet<ShareCode> = codes.iter().cloned().collect();
        self.expiries.retain(|code, _| listed.contains(code));

        let now = now_ms();
        for code in &codes {
            let expires_at = match self.expiries.get(code) {
                Some(&at) => at,
                None => match read_expiry(store, code).await {
                    Ok(Some(at)) => {
                        self.expiries.insert(code.clone(), at);
                        at
                    }
                    // Deleted since the listing, or unreadable (already logged).
                    Ok(None) => continue,
                    Err(()) => {
                        stats.errors += 1;
                        continue;
                    }
                },
            };
            if now >= expires_at {
                match store.delete(code).await {
                    Ok(()) => {
                        self.expiries.remove(code);
                        stats.expired += 1;
                        tracing::debug!(code = code.short(), "sweep: removed expired share");
                    }
                    Err(error) => {
                        stats.errors += 1;
                        tracing::warn!(code = code.short(), error = %redacted(&error), "sweep: removing failed");
                    }
                }
            }
        }

        stats.orphans += self.sweep_orphans(store, &listed, &mut stats.errors).await;
        match store.sweep_garbage(ORPHAN_GRACE).await {
            Ok(n) => stats.orphans += n,
            Err(error) => {
                stats.errors += 1;
                tracing::warn!(error = %redacted(&error), "sweep: removing temporary files failed");
            }
        }
        stats
    }

    /// Removes blobs older than [`ORPHAN_GRACE`] that have no record.
    async fn sweep_orphans(
        &self,
        store: &BlobStore,
        listed: &HashSet<ShareCode>,
        errors: &mut usize,
    ) -> usize {
        let blobs = match store.list_blobs().await {
            Ok(blobs) => blobs,
            Err(error) => {
                *errors += 1;
                tracing::warn!(error = %redacted(&error), "sweep: listing blobs failed");
                return 0;
            }
        };
        let mut removed = 0;
        let now = SystemTime::now();
        for blob in blobs {
            let old = now
                .duration_since(blob.modified)
                .is_ok_and(|age| age > ORPHAN_GRACE);
            if !old || listed.contains(&blob.code) {
                continue;
            }
            // The listing may predate a record written since: check before removing.
            match store.get_record(&blob.code).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(error) => {
                    *errors += 1;
                    tracing::warn!(code = blob.code.short(), error = %redacted(&error), "sweep: reading record failed");
                    continue;
                }
            }
            match store.delete_blob(&blob.code).await {
                Ok(()) => {
                    removed += 1;
                    tracing::info!(code = blob.code.short(), "sweep: removed orphaned blob");
                }
                Err(error) => {
                    *errors += 1;
                    tracing::warn!(code = blob.code.short(), error = %redacted(&error), "sweep: removing blob failed");
                }
            }
        }
        removed
    }
}

/// A record's expiry: `Ok(None)` if the record is gone or unparseable (logged, left alone: it
/// may come from a newer format this replica does not know).
async fn read_expiry(store: &BlobStore, code: &ShareCode) -> Result<Option<u64>, ()> {
    match store.get_record(code).await {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => match serde_json::from_slice::<ShareRecord>(&bytes) {
            Ok(record) => Ok(Some(record.expires_at)),
            Err(error) => {
                tracing::warn!(code = code.short(), error = %redacted(&error), "sweep: unreadable record left alone");
                Ok(None)
            }
        },
        Err(error) => {
            tracing::warn!(code = code.short(), error = %redacted(&error), "sweep: reading record failed");
            Err(())
        }
    }
}
