//! The stdio framing in front of the SDK's transport: each line from the client is checked
//! before `rmcp` sees it.
//!
//! JSON-RPC 2.0 (§5.1) answers a message that is not JSON with a Parse error (`-32700`,
//! `id: null`); the SDK drops such a line without a word, so a client that sent a broken
//! request waits for an answer that never comes. Here a line that does not parse as JSON, or
//! is past [`MAX_LINE_BYTES`] (measured, never held), is answered with `-32700` and goes no
//! further; every other line is handed to the SDK unchanged (which answers JSON that is not a
//! request with `-32600` itself). A UTF-8 byte-order mark on the first line is dropped.
//!
//! A peer that answers errors with more garbage (a client writing its logs to our stdin, say)
//! could bounce parse errors with us forever, which is why the SDK chose silence: after
//! [`MAX_PARSE_ERRORS_IN_A_ROW`] unparseable lines with no good one between, the rest are only
//! logged until a good line comes.
//!
//! Output is one writer: the SDK's messages and the parse errors are written to stdout whole
//! lines at a time, never interleaved inside a line.

use freecode_core::limits::MAX_LINE_BYTES;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Unparseable lines answered in a row before the rest are only logged.
pub const MAX_PARSE_ERRORS_IN_A_ROW: u32 = 16;

/// Room in each pipe between the SDK and the framing.
const PIPE_BYTES: usize = 256 << 10;

/// One line read by [`read_line`].
struct Line {
    /// Its bytes without the newline; empty when it was past the cap.
    bytes: Vec<u8>,
    /// Its length, whether kept or not.
    len: u64,
    /// Whether the end of the input came before any byte of it.
    eof: bool,
}

/// Reads one line, keeping at most [`MAX_LINE_BYTES`] of it.
async fn read_line(r: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Line> {
    let mut line = Line {
        bytes: Vec::new(),
        len: 0,
        eof: true,
    };
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(line);
        }
        line.eof = false;
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let content = &buf[..take - usize::from(done)];
        line.len += content.len() as u64;
        if line.len <= MAX_LINE_BYTES as u64 {
            line.bytes.extend_from_slice(content);
        } else if !line.bytes.is_empty() {
            line.bytes = Vec::new();
        }
        r.consume(take);
        if done {
            return Ok(line);
        }
    }
}

/// The Parse error answer to a line that is not JSON.
fn parse_error(why: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": "Parse error", "data": why},
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

/// Copies the client's lines from `input` to `to_sdk`, answering the ones that are not JSON
/// through `errors`. Ends at the end of `input` (closing `to_sdk`, which ends the SDK's read).
async fn check_input(
    input: impl AsyncRead + Unpin,
    mut to_sdk: impl AsyncWrite + Unpin,
    errors: mpsc::Sender<Vec<u8>>,
) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(PIPE_BYTES, input);
    let mut in_a_row = 0u32;
    let mut number = 0u64;
    loop {
        let line = read_line(&mut input).await?;
        if line.eof {
            break;
        }
        number += 1;
        let mut bytes = line.bytes.as_slice();
        if number == 1 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) && line.len <= MAX_LINE_BYTES as u64 {
            continue;
        }
        let why = if line.len > MAX_LINE_BYTES as u64 {
            Some(format!(
                "line {number} is {} bytes, past the {MAX_LINE_BYTES} a message may hold",
                line.len
            ))
        } else {
            serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
                .err()
                .map(|e| format!("line {number}: {e}"))
        };
        let Some(why) = why else {
            in_a_row = 0;
            to_sdk.write_all(bytes).await?;
            to_sdk.write_all(b"\n").await?;
            to_sdk.flush().await?;
            continue;
        };
        in_a_row = in_a_row.saturating_add(1);
        tracing::warn!("MCP input is not JSON: {why}");
        if in_a_row <= MAX_PARSE_ERRORS_IN_A_ROW {
            if errors.send(parse_error(&why)).await.is_err() {
                break;
            }
        } else if in_a_row == MAX_PARSE_ERRORS_IN_A_ROW + 1 {
            tracing::warn!(
                "{MAX_PARSE_ERRORS_IN_A_ROW} unparseable lines in a row: the next ones are not \
                 answered until a line parses"
            );
        }
    }
    to_sdk.shutdown().await
}

/// Writes the SDK's output (`from_sdk`, whole lines) and the parse errors to `output`, until
/// both have ended.
async fn write_output(
    from_sdk: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
    mut errors: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    let mut from_sdk = BufReader::with_capacity(PIPE_BYTES, from_sdk);
    let mut line = Vec::new();
    let (mut sdk_open, mut errors_open) = (true, true);
    while sdk_open || errors_open {
        tokio::select! {
            read = from_sdk.read_until(b'\n', &mut line), if sdk_open => {
                if read? == 0 {
                    sdk_open = false;
                } else {
                    output.write_all(&line).await?;
                    output.flush().await?;
                    line.clear();
                }
            }
            error = errors.recv(), if errors_open => match error {
                Some(e) => {
                    output.write_all(&e).await?;
                    output.flush().await?;
                }
                None => errors_open = false,
            },
        }
    }
    Ok(())
}

/// The SDK's transport over `input` and `output` with the checks of the [module docs](self):
/// the pair of pipes to hand `rmcp`, and the task that runs the framing (it ends when the
/// input has ended and the SDK has closed its side).
pub fn framed(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> (
    (tokio::io::DuplexStream, tokio::io::DuplexStream),
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let (to_sdk, sdk_in) = tokio::io::duplex(PIPE_BYTES);
    let (sdk_out, from_sdk) = tokio::io::duplex(PIPE_BYTES);
    let (errors_tx, errors_rx) = mpsc::channel(MAX_PARSE_ERRORS_IN_A_ROW as usize);
    let task = tokio::spawn(async move {
        let (checked, written) = tokio::join!(
            check_input(input, to_sdk, errors_tx),
            write_output(from_sdk, output, errors_rx)
        );
        checked.and(written)
    });
    ((sdk_in, sdk_out), task)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The framing alone (no SDK behind it: what reaches it is echoed back).
    async fn run(input: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (client, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, mut out) = tokio::io::duplex(1 << 20);
        let ((mut sdk_in, mut sdk_out), task) = framed(server_in, server_out);
        let mut client = client;
        client.write_all(input).await.unwrap();
        client.shutdown().await.unwrap();
        drop(client);
        let mut seen = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut sdk_in, &mut seen)
            .await
            .unwrap();
        sdk_out.write_all(b"{\"echo\":1}\n").await.unwrap();
        sdk_out.shutdown().await.unwrap();
        drop(sdk_out);
        task.await.unwrap().unwrap();
        let mut written = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut out, &mut written)
            .await
            .unwrap();
        (seen, written)
    }

    #[tokio::test]
    async fn json_passes_and_the_rest_gets_a_parse_error() {
        let (seen, written) =
            run(b"\xEF\xBB\xBF{\"a\":1}\r\nnot json\n\n[1,\"\xC3\xA9t\xC3\xA9\"]\n{\"cut\":").await;
        assert_eq!(seen, b"{\"a\":1}\n[1,\"\xC3\xA9t\xC3\xA9\"]\n");
        let lines: Vec<serde_json::Value> = written
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        let errors: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|v| v["error"]["code"] == -32700)
            .collect();
        assert_eq!(errors.len(), 2, "{lines:?}");
        assert!(
            errors
                .iter()
                .all(|e| e["id"].is_null() && e["jsonrpc"] == "2.0")
        );
        assert!(
            errors[0]["error"]["data"]
                .as_str()
                .unwrap()
                .starts_with("line 2")
        );
        assert!(lines.iter().any(|v| v["echo"] == 1));
    }

    #[tokio::test]
    async fn a_storm_of_garbage_is_answered_only_so_far() {
        let mut input = Vec::new();
        for _ in 0..100 {
            input.extend_from_slice(b"garbage\n");
        }
        input.extend_from_slice(b"{}\nmore garbage\n");
        let (seen, written) = run(&input).await;
        assert_eq!(seen, b"{}\n");
        let errors = written
            .split(|b| *b == b'\n')
            .filter(|l| l.windows(6).any(|w| w == b"-32700"))
            .count();
        // 16 of the first 100, then one more after the good line.
        assert_eq!(errors, MAX_PARSE_ERRORS_IN_A_ROW as usize + 1);
    }
}
