//! `doctor`: what crashes, older tools and careless hands left in a home (leftover directories,
//! torn tails, garbage journals, corrupt metas, links, loose modes, a damaged index), repaired
//! on request ([`freecode_store::doctor`]).

use freecode_store::Home;

use crate::error::Result;
use crate::types::DoctorReport;

/// Examines `home`, and repairs what can be repaired safely with `fix` (nothing a running
/// process holds is touched).
pub fn examine(home: &Home, fix: bool) -> Result<DoctorReport> {
    let report = freecode_store::doctor::examine(home, fix)?;
    let unresolved = report.unresolved();
    Ok(DoctorReport {
        home: home.root().to_path_buf(),
        sessions: report.sessions,
        findings: report.findings,
        unresolved,
    })
}
