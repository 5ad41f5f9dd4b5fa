//! Long human output through a pager, as git does: when stdout is a terminal and what a command
//! prints is longer than the screen, it goes to `$PAGER` (default `less -R`, which passes colour
//! through); shorter output, piped output, `--no-pager` and `PAGER=` (empty) or `PAGER=cat` print
//! directly.
//!
//! [`Pager`] is a writer that holds the first screenful: past the screen's height it starts the
//! pager, hands it what it held and streams the rest, so an 800,000-line session is never held
//! in memory. A pager that cannot be started falls back to printing. Quitting the pager early
//! closes the pipe, which the binary treats as success (exit 0).

use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

/// Where the output currently goes.
enum Sink {
    /// Straight to stdout (not a terminal, paging off, or short so far and no screen size).
    Direct(io::StdoutLock<'static>),
    /// Held until it is longer than `rows` lines.
    Holding {
        held: Vec<u8>,
        lines: usize,
        rows: usize,
        cols: usize,
        /// Columns used on the current line (long lines wrap on screen).
        col: usize,
    },
    /// Piped into the pager.
    Paging {
        child: Child,
        stdin: Option<ChildStdin>,
    },
}

/// A writer for a command's human output that pages when it must.
pub struct Pager {
    sink: Sink,
}

/// The pager command: `$PAGER`, else `less -R`; `None` when paging is off (`PAGER=` or `cat`).
fn pager_command() -> Option<String> {
    match std::env::var("PAGER") {
        Ok(p) if p.trim().is_empty() || p.trim() == "cat" => None,
        Ok(p) => Some(p),
        Err(_) => Some("less -R".to_owned()),
    }
}

impl Pager {
    /// A writer to stdout that pages through `$PAGER` when `enabled`, stdout is a terminal and
    /// the output passes the screen's height.
    pub fn new(enabled: bool) -> Self {
        let size = if enabled && pager_command().is_some() {
            crate::render::terminal_size()
        } else {
            None
        };
        let sink = match size {
            Some((cols, rows)) => Sink::Holding {
                held: Vec::new(),
                lines: 0,
                rows,
                cols,
                col: 0,
            },
            None => Sink::Direct(io::stdout().lock()),
        };
        Self { sink }
    }

    /// Starts the pager with what was held; prints directly if it cannot be started.
    fn start_pager(&mut self) -> io::Result<()> {
        let Sink::Holding { held, .. } = &mut self.sink else {
            return Ok(());
        };
        let held = std::mem::take(held);
        let spawned = pager_command().and_then(|cmd| {
            let mut command = Command::new("sh");
            command.arg("-c").arg(&cmd).stdin(Stdio::piped());
            if std::env::var_os("LESS").is_none() {
                // Quit at once if it fits after all; keep colour; leave the screen as it was.
                command.env("LESS", "FRX");
            }
            match command.spawn() {
                Ok(child) => Some(child),
                Err(e) => {
                    tracing::warn!("cannot start the pager {cmd:?} ({e}); printing directly");
                    None
                }
            }
        });
        match spawned {
            Some(mut child) => match child.stdin.take() {
                Some(mut stdin) => {
                    stdin.write_all(&held)?;
                    self.sink = Sink::Paging {
                        child,
                        stdin: Some(stdin),
                    };
                }
                None => {
                    let mut out = io::stdout().lock();
                    out.write_all(&held)?;
                    self.sink = Sink::Direct(out);
                }
            },
            None => {
                let mut out = io::stdout().lock();
                out.write_all(&held)?;
                self.sink = Sink::Direct(out);
            }
        }
        Ok(())
    }

    /// Flushes what is held to stdout, or closes the pager's input and waits for it.
    pub fn finish(mut self) -> io::Result<()> {
        self.close()
    }

    fn close(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Direct(out) => out.flush(),
            Sink::Holding { held, .. } => {
                let held = std::mem::take(held);
                let mut out = io::stdout().lock();
                out.write_all(&held)?;
                out.flush()
            }
            Sink::Paging { child, stdin } => {
                drop(stdin.take());
                child.wait()?;
                Ok(())
            }
        }
    }
}

impl Drop for Pager {
    /// On an early return (an error), the pager still gets its end of input and is waited for,
    /// so the shell's prompt never lands in the middle of it.
    fn drop(&mut self) {
        if let Sink::Paging { child, stdin } = &mut self.sink {
            drop(stdin.take());
            let _ = child.wait();
        }
    }
}

impl Write for Pager {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Sink::Direct(out) => out.write(buf),
            Sink::Paging { stdin, .. } => match stdin {
                Some(stdin) => stdin.write(buf),
                None => Err(io::ErrorKind::BrokenPipe.into()),
            },
            Sink::Holding {
                held,
                lines,
                rows,
                cols,
                col,
            } => {
                held.extend_from_slice(buf);
                // Screen lines: each newline, plus each wrap of a line wider than the screen
                // (bytes approximate columns; escapes make it err towards paging).
                for &b in buf {
                    if b == b'\n' {
                        *lines += 1;
                        *col = 0;
                    } else if b & 0xC0 != 0x80 {
                        *col += 1;
                        if *col > *cols {
                            *lines += 1;
                            *col = 1;
                        }
                    }
                }
                if *lines >= *rows {
                    self.start_pager()?;
                }
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Direct(out) => out.flush(),
            Sink::Paging { stdin, .. } => stdin.as_mut().map_or(Ok(()), Write::flush),
            Sink::Holding { .. } => Ok(()),
        }
    }
}
