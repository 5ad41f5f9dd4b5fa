//! The readers the session index serves: full-text `search`, `stats` (turns, tool calls by
//! tool, model time, tokens) and `index rebuild`; each answers from the files when the index
//! cannot be used ([`crate::index::indexed_or_scanned`]), with the same answer.

use freecode_store::Home;
use freecode_store::index::{SearchHit, SearchQuery, StatsScope, search_scan, stats_scan};

use crate::error::{Error, Result};
use crate::index::{indexed_or_scanned, open_index, refreshed_then, warn_problems};
use crate::progress::Progress;
use crate::sessions::open;
use crate::types::{Problem, Rebuilt, StatsReport};

/// The hits of `q`, best first (BM25, then newest), after bringing the index up to date
/// (`progress` hears how far it is). The damaged session files left out are logged.
pub fn search(home: &Home, q: &SearchQuery, progress: &mut dyn Progress) -> Result<Vec<SearchHit>> {
    let (hits, problems) = indexed_or_scanned(
        home,
        |ix| refreshed_then(ix, progress, |ix| ix.search(q)),
        || Ok(search_scan(&open(home)?, q)?),
    )?;
    warn_problems(&problems);
    Ok(hits)
}

/// The figures of `scope`: one session (which must exist), a project, or everything. The
/// damaged session files left out are logged and listed.
pub fn stats(home: &Home, scope: &StatsScope, progress: &mut dyn Progress) -> Result<StatsReport> {
    let store = open(home)?;
    if let StatsScope::Session(id) = scope {
        // A clear "not found" rather than empty stats.
        store.meta(id)?;
    }
    let (stats, problems) = indexed_or_scanned(
        home,
        |ix| refreshed_then(ix, progress, |ix| ix.stats(scope)),
        || Ok(stats_scan(&store, scope)?),
    )?;
    warn_problems(&problems);
    Ok(StatsReport {
        stats,
        problems: Problem::all(&problems),
    })
}

/// Drops the session index and rebuilds it from the files; it needs the SQLite backend.
pub fn rebuild(home: &Home, progress: &mut dyn Progress) -> Result<Rebuilt> {
    let Some(mut ix) = open_index(home)? else {
        return Err(Error::Failed(
            "the session index needs the SQLite backend, which is not available here (see FREECODE_LOG=info)"
                .into(),
        ));
    };
    let report = ix.rebuild(|done, total| progress.sessions(done, total))?;
    warn_problems(&report.problems);
    Ok(Rebuilt {
        sessions: report.sessions,
        messages: report.messages,
        events: report.events,
        database: ix.path().to_path_buf(),
        problems: Problem::all(&report.problems),
    })
}
