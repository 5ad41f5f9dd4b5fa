//! Share server over a real S3-protocol server: moto (`python3 -m moto.server`) on loopback.
//!
//! Needs `pip install 'moto[server]'`; without it these tests fail (they do not skip).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use freecode_remote::blob::{S3Options, StoreSpec};
use freecode_remote::server::{self, ServerConfig, ServerHandle};
use object_store::ObjectStore as _;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use support::{
    agent, assert_replicas_act_as_one, delete, get, random_bytes, upload, upload_expiring,
};

/// moto (from the testkit) with what these tests read of it.
struct Moto(freecode_testkit::Moto);

impl Moto {
    fn start() -> Self {
        Self(freecode_testkit::Moto::start())
    }

    fn create_bucket(&self, bucket: &str) {
        self.0.create_bucket(bucket);
    }

    fn endpoint(&self) -> String {
        self.0.endpoint()
    }

    fn options(&self) -> S3Options {
        S3Options {
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            access_key_id: Some("test-access-key".into()),
            secret_access_key: Some("test-secret-key".into()),
            session_token: None,
            allow_http: Some(true),
        }
    }

    fn spec(&self, bucket: &str, prefix: &str) -> StoreSpec {
        StoreSpec::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
            options: self.options(),
        }
    }

    /// Keys directly under `<prefix>/<folder>` in `bucket`, listed straight from S3.
    fn keys(&self, bucket: &str, prefix: &str, folder: &str) -> Vec<String> {
        let s3 = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(self.endpoint())
            .with_region("us-east-1")
            .with_access_key_id("test-access-key")
            .with_secret_access_key("test-secret-key")
            .with_allow_http(true)
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let path = ObjectPath::from(format!("{prefix}/{folder}"));
        let listed = rt.block_on(s3.list_with_delimiter(Some(&path))).unwrap();
        let mut keys: Vec<String> = listed
            .objects
            .into_iter()
            .map(|o| o.location.to_string())
            .collect();
        keys.sort();
        keys
    }
}

fn start(moto: &Moto, bucket: &str, prefix: &str, sweep: Duration) -> ServerHandle {
    server::spawn(ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        store: moto.spec(bucket, prefix),
        sweep_interval: sweep,
        ..ServerConfig::default()
    })
    .unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn s3_round_trip_and_layout() {
    let moto = Moto::start();
    moto.create_bucket("shares");
    let server = start(&moto, "shares", "team/freecode", HOUR);
    let agent = agent();

    let health = get(&agent, &server.url, "healthz");
    assert_eq!(health.status, 200);
    assert_eq!(health.json(), serde_json::json!({"status": "ok"}));

    let bundle = random_bytes(200 * 1024 + 3);
    let up = upload(&agent, &server.url, &bundle, "application/octet-stream");
    let reply = get(&agent, &server.url, &up.code);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, bundle);
    assert_eq!(
        reply.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(
        reply.header("x-freecode-expires-at"),
        Some(up.expires_at.to_string().as_str())
    );

    let json = upload(&agent, &server.url, br#"{"a":1}"#, "application/json");
    assert_eq!(
        get(&agent, &server.url, &json.code).content_type.as_deref(),
        Some("application/json")
    );

    let mut blobs = vec![
        format!("team/freecode/blobs/{}", up.code),
        format!("team/freecode/blobs/{}", json.code),
    ];
    blobs.sort();
    assert_eq!(moto.keys("shares", "team/freecode", "blobs"), blobs);
    let mut metas = vec![
        format!("team/freecode/meta/{}.json", up.code),
        format!("team/freecode/meta/{}.json", json.code),
    ];
    metas.sort();
    assert_eq!(moto.keys("shares", "team/freecode", "meta"), metas);

    assert_eq!(
        get(&agent, &server.url, "0123456789abcdef0123456789abcdef").status,
        404
    );
}

#[test]
fn s3_missing_bucket_is_unhealthy() {
    let moto = Moto::start();
    let server = start(&moto, "no-such-bucket", "x", HOUR);
    assert_eq!(get(&agent(), &server.url, "healthz").status, 503);
}

#[test]
fn s3_expiry_is_410_and_swept() {
    let moto = Moto::start();
    moto.create_bucket("expiry");
    let agent = agent();
    {
        let server = start(&moto, "expiry", "p", HOUR);
        let read = upload_expiring(&agent, &server.url, b"read after expiry", 1);
        let unread = upload_expiring(&agent, &server.url, b"never read", 1);
        let keep = upload(&agent, &server.url, b"keep", "application/octet-stream");
        std::thread::sleep(Duration::from_millis(1300));
        assert_eq!(get(&agent, &server.url, &read.code).status, 410);
        assert_eq!(get(&agent, &server.url, &read.code).status, 404);
        assert!(
            !moto
                .keys("expiry", "p", "blobs")
                .iter()
                .any(|k| k.ends_with(&read.code))
        );
        assert!(
            moto.keys("expiry", "p", "blobs")
                .iter()
                .any(|k| k.ends_with(&unread.code))
        );

        // A second replica with a quick sweeper removes the one nobody read.
        let sweeper = start(&moto, "expiry", "p", Duration::from_millis(200));
        let swept = support::wait_until(Duration::from_secs(15), || {
            moto.keys("expiry", "p", "meta").len() == 1
                && moto.keys("expiry", "p", "blobs").len() == 1
        });
        assert!(
            swept,
            "expired share still in the bucket: {:?}",
            moto.keys("expiry", "p", "blobs")
        );
        assert_eq!(get(&agent, &sweeper.url, &unread.code).status, 404);
        assert_eq!(get(&agent, &server.url, &keep.code).status, 200);
    }
}

#[test]
fn s3_delete_needs_the_token() {
    let moto = Moto::start();
    moto.create_bucket("revoke");
    let server = start(&moto, "revoke", "", HOUR);
    let agent = agent();
    let up = upload(&agent, &server.url, b"bytes", "application/octet-stream");
    assert_eq!(moto.keys("revoke", "", "blobs").len(), 1);
    assert_eq!(delete(&agent, &server.url, &up.code, None).status, 403);
    assert_eq!(
        delete(&agent, &server.url, &up.code, Some("wrong")).status,
        403
    );
    assert_eq!(
        delete(&agent, &server.url, &up.code, Some(&up.delete_token)).status,
        204
    );
    assert_eq!(get(&agent, &server.url, &up.code).status, 404);
    assert!(moto.keys("revoke", "", "blobs").is_empty());
    assert!(moto.keys("revoke", "", "meta").is_empty());
}

#[test]
fn s3_two_replicas_over_one_bucket() {
    let moto = Moto::start();
    moto.create_bucket("replicas");
    let a = start(&moto, "replicas", "shared/prefix", HOUR);
    let b = start(&moto, "replicas", "shared/prefix", HOUR);
    assert_replicas_act_as_one(&a.url, &b.url, 100 * 1024);
}

#[test]
fn s3_sync_two_replicas_accept_every_record_once() {
    use freecode_remote::home_sync::{Claimed, HostId, Kind, Put, Remote, SyncKey};
    let moto = Moto::start();
    moto.create_bucket("sync");
    let one = start(&moto, "sync", "home", HOUR);
    let two = start(&moto, "sync", "home", HOUR);
    let key = SyncKey::generate().unwrap();
    let remotes = [
        Remote::new(&one.url, None).unwrap().for_key(&key),
        Remote::new(&two.url, None).unwrap().for_key(&key),
    ];
    let log = key.log_id("a-session");

    // Eight writers race for one index and one claim through both replicas: one of each wins.
    let host = HostId::generate().unwrap();
    let results: Vec<(Put, Claimed)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                let remote = remotes[usize::from(i % 2)].clone();
                let key = key.clone();
                s.spawn(move || {
                    let sealed = key.seal(Kind::Session, &host, &log, 0, &[i; 64]).unwrap();
                    let put = remote.put_record(&log, &host, 0, &sealed).unwrap();
                    let base = key.genesis("a-session");
                    let claim = key.seal_claim(&log, &base, &host, u64::from(i)).unwrap();
                    let claimed = remote.put_claim(&log, &base, &claim).unwrap();
                    (put, claimed)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|(p, _)| *p == Put::Created).count(),
        1
    );
    assert_eq!(
        results
            .iter()
            .filter(|(_, c)| *c == Claimed::Created)
            .count(),
        1
    );
    // Every loser was told the winner's claim, and it opens.
    let base = key.genesis("a-session");
    let winners: std::collections::BTreeSet<u64> = results
        .iter()
        .filter_map(|(_, c)| match c {
            Claimed::Exists(b) => Some(key.open_claim(&log, &base, b).unwrap().1),
            Claimed::Created => None,
        })
        .collect();
    assert_eq!(winners.len(), 1);

    // Two hosts append 20 records each at once, one through each replica.
    let hosts = [HostId::generate().unwrap(), HostId::generate().unwrap()];
    std::thread::scope(|s| {
        for (n, h) in hosts.iter().enumerate() {
            let remote = remotes[n].clone();
            let key = key.clone();
            s.spawn(move || {
                for i in 0..20u64 {
                    let sealed = key
                        .seal(Kind::Session, h, &log, i, format!("{n}:{i}").as_bytes())
                        .unwrap();
                    assert_eq!(
                        remote.put_record(&log, h, i, &sealed).unwrap(),
                        Put::Created
                    );
                }
            });
        }
    });
    // A gap is refused.
    let sealed = key.seal(Kind::Session, &hosts[0], &log, 30, b"x").unwrap();
    assert!(remotes[1].put_record(&log, &hosts[0], 30, &sealed).is_err());
    // Both replicas count the same from the bucket, and every record opens where it is.
    for remote in &remotes {
        let mut status = remote.status().unwrap();
        status.sort_by_key(|l| l.host);
        let counts: Vec<u64> = hosts
            .iter()
            .map(|h| status.iter().find(|l| l.host == *h).unwrap().count)
            .collect();
        assert_eq!(counts, [20, 20]);
        for (n, h) in hosts.iter().enumerate() {
            let (records, next) = remote.get_records(&log, h, 5).unwrap();
            assert_eq!(next, 20);
            for (i, r) in records.iter().enumerate() {
                let opened = key.open(h, &log, 5 + i as u64, r).unwrap();
                assert_eq!(opened.plaintext, format!("{n}:{}", 5 + i).as_bytes());
            }
        }
    }
    // A batch of claims and records: stored once across replicas, the losers told.
    {
        use freecode_remote::home_sync::{BatchAnswer, BatchItem};
        let log2 = key.log_id("batched");
        let base = key.genesis("batched");
        let h = hosts[0];
        let claim = key.seal_claim(&log2, &base, &h, 0).unwrap();
        let r0 = key.seal(Kind::Session, &h, &log2, 0, b"zero").unwrap();
        let r5 = key.seal(Kind::Session, &h, &log2, 5, b"five").unwrap();
        let items = [
            BatchItem::Claim {
                log: &log2,
                base: &base,
                sealed: &claim,
            },
            BatchItem::Record {
                log: &log2,
                host: &h,
                index: 0,
                sealed: &r0,
            },
            BatchItem::Record {
                log: &log2,
                host: &h,
                index: 5,
                sealed: &r5,
            },
        ];
        assert_eq!(
            remotes[0].batch(&items).unwrap(),
            [BatchAnswer::Created, BatchAnswer::Created, BatchAnswer::Gap]
        );
        let again = remotes[1].batch(&items[..2]).unwrap();
        assert_eq!(again[0], BatchAnswer::Exists(claim.clone()));
        assert_eq!(again[1], BatchAnswer::Exists(Vec::new()));
        let (got, _) = remotes[1].get_records(&log2, &h, 0).unwrap();
        assert_eq!(key.open(&h, &log2, 0, &got[0]).unwrap().plaintext, b"zero");
        remotes[0].delete_log(&log2).unwrap();
    }

    // A key rotation over S3: the ring is create-only across replicas, a record's new wrap
    // goes in through one and is read back through the other, and only the wrap changes.
    let new = key.rotate().unwrap();
    let ring = new.seal_ring().unwrap();
    assert!(remotes[0].put_ring(&new.id(), &ring).unwrap());
    assert!(!remotes[1].put_ring(&new.id(), &ring).unwrap());
    let got = remotes[1].get_ring(&new.id()).unwrap().unwrap();
    let bare = SyncKey::from_phrase(&new.to_phrase()).unwrap();
    assert_eq!(bare.with_ring(&got).unwrap(), new);
    assert_eq!(remotes[0].get_ring(&key.id()).unwrap(), None);
    let (old, _) = remotes[0].get_records(&log, &hosts[0], 3).unwrap();
    let moved = new.rewrap(&hosts[0], &log, 3, &old[0]).unwrap().unwrap();
    let span = freecode_remote::home_sync::seal::WRAP_SPAN;
    assert!(
        remotes[1]
            .rewrap_record(&log, &hosts[0], 3, &moved[span.clone()])
            .unwrap()
    );
    let (back, _) = remotes[0].get_records(&log, &hosts[0], 3).unwrap();
    assert_eq!(back[0], moved);
    assert_eq!(
        new.open(&hosts[0], &log, 3, &back[0]).unwrap().plaintext,
        b"0:3"
    );
    assert!(key.open(&hosts[0], &log, 3, &back[0]).is_err());
    // No record there: nothing stored; a body that is not a wrap: refused.
    assert!(
        !remotes[0]
            .rewrap_record(&log, &hosts[0], 99, &moved[span.clone()])
            .unwrap()
    );
    assert!(
        remotes[0]
            .rewrap_record(&log, &hosts[0], 3, &moved)
            .is_err()
    );

    // A purge through one replica empties the log for both.
    remotes[0].delete_log(&log).unwrap();
    // At once for the records; the other replica's counts once its listing is past its age.
    assert!(
        remotes[1]
            .get_records(&log, &hosts[0], 0)
            .unwrap()
            .0
            .is_empty()
    );
    std::thread::sleep(freecode_remote::server::SYNC_STATUS_TTL);
    assert!(remotes[1].status().unwrap().is_empty());
    assert!(moto.keys("sync", "home", "sync").is_empty());
}
