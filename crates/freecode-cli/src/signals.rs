//! Ctrl+C for the commands that run the agent (`run`, `serve`): SIGINT is routed to the
//! agent's [`Interrupts`] through a signal-hook thread.
//!
//! The signal handler itself only wakes a signal-hook iterator thread (a self-pipe; no unsafe
//! code, nothing but an atomic write in signal context). That thread asks the state machine what
//! the press means ([`Interrupts::on_sigint`]): raise the flags of the turns in flight (their
//! loops notice within a tick, save what they had and mark the session), ignore it while idle,
//! or — a second press within a second — exit with status 1 through [`exit_when_idle`], after
//! any write in progress.

use freecode_agent::interrupt::FORCE_EXIT_MAX_WAIT;
use freecode_agent::{Action, Interrupts};
use freecode_store::fsutil::exit_when_idle;

/// Takes over SIGINT for the rest of the process: a thread receives each signal and acts on
/// it for `interrupts` (see the module docs). Messages go to stderr.
pub fn install_sigint_handler(interrupts: &Interrupts) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT])?;
    let me = interrupts.clone();
    std::thread::Builder::new()
        .name("sigint".into())
        .spawn(move || {
            for _ in signals.forever() {
                match me.on_sigint(freecode_store::now_ms()) {
                    Action::ForceExit => {
                        eprintln!("\ninterrupted twice: exiting");
                        exit_when_idle(1, FORCE_EXIT_MAX_WAIT);
                    }
                    Action::Interrupt(targets) => {
                        let ids: Vec<&str> = targets.iter().map(|t| t.session.as_str()).collect();
                        eprintln!(
                            "\ninterrupting {} (Ctrl+C again within 1 s exits at once)",
                            ids.join(", ")
                        );
                    }
                    Action::Ignore => {
                        tracing::debug!("Ctrl+C while idle: nothing to interrupt");
                    }
                }
            }
        })?;
    Ok(())
}
