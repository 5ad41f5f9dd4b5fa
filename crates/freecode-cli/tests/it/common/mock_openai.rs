//! A mock OpenAI-compatible server on loopback for the `freecode run` tests: a std
//! `TcpListener` in a thread speaking just enough HTTP/1.1. Each request gets the next scripted
//! [`Reply`]: an SSE stream (chunked, one chunk per `data:` line, optionally slow, optionally
//! left hanging without closing) or an error status. Requests are kept for inspection, and the
//! test is told as chunks go out so it can act mid-stream.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What the stream does after its payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `data: [DONE]`, then the body ends.
    Done,
    /// Nothing more, and the connection stays open (a stalled provider).
    Hang,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream` with these `data:` payloads, `delay` before each.
    Stream {
        payloads: Vec<String>,
        delay: Duration,
        end: End,
    },
    /// An error status with this body.
    Status { code: u16, body: String },
}

impl Reply {
    /// A quick, complete stream.
    pub fn stream(payloads: Vec<String>) -> Self {
        Self::Stream {
            payloads,
            delay: Duration::ZERO,
            end: End::Done,
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Progress reports to the test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Response headers of request `request` (0-based) were sent.
    Headers { request: usize },
    /// `chunks` payloads of request `request` were sent.
    Sent { request: usize, chunks: usize },
    /// The stream of request `request` is hanging.
    Hanging { request: usize },
}

/// The running server; stops (and releases hanging connections) when dropped.
pub struct MockOpenAi {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Received>>>,
    progress: Receiver<Progress>,
    stop: Arc<AtomicBool>,
}

impl MockOpenAi {
    /// Serves `replies` in order; later requests get a 500.
    pub fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            conn.set_nonblocking(false).unwrap();
                            let (requests, queue, stop, tx) =
                                (requests.clone(), queue.clone(), stop.clone(), tx.clone());
                            std::thread::spawn(move || {
                                serve(conn, &requests, &queue, &stop, &tx);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }
        Self {
            base_url: format!("http://{addr}/v1"),
            requests,
            progress: rx,
            stop,
        }
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits (up to `timeout`) for a progress report matching `want`.
    pub fn wait_for(&self, timeout: Duration, want: impl Fn(&Progress) -> bool) -> Progress {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.progress.recv_timeout(left) {
                Ok(p) if want(&p) => return p,
                Ok(_) => {}
                Err(e) => panic!("mock server: no matching progress within {timeout:?}: {e}"),
            }
        }
    }
}

impl Drop for MockOpenAi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(
    conn: TcpStream,
    requests: &Mutex<Vec<Received>>,
    queue: &Mutex<VecDeque<Reply>>,
    stop: &AtomicBool,
    tx: &Sender<Progress>,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .expect("the client sends a content-length");
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).unwrap();
    let index = {
        let mut r = requests.lock().unwrap();
        r.push(Received {
            method,
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        r.len() - 1
    };
    let reply = queue.lock().unwrap().pop_front().unwrap_or(Reply::Status {
        code: 500,
        body: "no more scripted replies".into(),
    });
    let mut conn = conn;
    match reply {
        Reply::Status { code, body } => {
            let _ = write!(
                conn,
                "HTTP/1.1 {code} Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.flush();
            let _ = tx.send(Progress::Headers { request: index });
        }
        Reply::Stream {
            payloads,
            delay,
            end,
        } => {
            if write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                 Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            .and_then(|()| conn.flush())
            .is_err()
            {
                return;
            }
            let _ = tx.send(Progress::Headers { request: index });
            for (i, p) in payloads.iter().enumerate() {
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
                if send_chunk(&mut conn, &format!("data: {p}\n\n")).is_err() {
                    return;
                }
                let _ = tx.send(Progress::Sent {
                    request: index,
                    chunks: i + 1,
                });
            }
            match end {
                End::Done => {
                    let _ = send_chunk(&mut conn, "data: [DONE]\n\n")
                        .and_then(|()| conn.write_all(b"0\r\n\r\n"))
                        .and_then(|()| conn.flush());
                }
                End::Hang => {
                    let _ = tx.send(Progress::Hanging { request: index });
                    // Keep the connection open until the client goes away or the test ends.
                    conn.set_read_timeout(Some(Duration::from_millis(50)))
                        .unwrap();
                    let mut buf = [0u8; 64];
                    while !stop.load(Ordering::SeqCst) {
                        match conn.read(&mut buf) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }
            }
        }
    }
}

fn send_chunk(conn: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(conn, "{:x}\r\n{data}\r\n", data.len())?;
    conn.flush()
}

// ----- payload builders ---------------------------------------------------------------------

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

/// A text delta.
pub fn text(t: &str) -> String {
    chunk(json!({"content": t}), None)
}

/// A tool call, in two fragments (name and half the arguments, then the rest).
pub fn tool_call(index: u64, id: &str, name: &str, args: Value) -> Vec<String> {
    let args = args.to_string();
    let (a, b) = args.split_at(args.len() / 2);
    vec![
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": a}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": b}}]}),
            None,
        ),
    ]
}

/// The finish reason.
pub fn finish(reason: &str) -> String {
    chunk(json!({}), Some(reason))
}

/// The usage chunk (`stream_options.include_usage`).
pub fn usage(input: u64, output: u64) -> String {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output,
        "total_tokens": input + output}})
    .to_string()
}
