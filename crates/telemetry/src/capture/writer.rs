//! The capture's writer thread: serialises records and writes them through a buffered file.
//!
//! A thread of its own rather than a runtime task, because file writes block: a slow disk then
//! stalls only this thread, and the bounded channel in front of it turns the backlog into
//! counted drops instead of waiting requests.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc::{self, error::TryRecvError};

use super::Msg;

/// Bytes buffered before a write reaches the file (about 100 records).
const BUFFER_BYTES: usize = 64 * 1024;

/// Starts the writer thread for `file`.
pub(super) fn spawn(
    file: File,
    rx: mpsc::Receiver<Msg>,
    path: &Path,
    written: Counter,
    dropped: Counter,
) -> std::io::Result<()> {
    let path = path.display().to_string();
    std::thread::Builder::new()
        .name("infergate-capture".into())
        .spawn(move || {
            run(
                BufWriter::with_capacity(BUFFER_BYTES, file),
                rx,
                &path,
                &written,
                &dropped,
            )
        })
        .map(drop)
}

fn run(
    mut out: BufWriter<File>,
    mut rx: mpsc::Receiver<Msg>,
    path: &str,
    written: &Counter,
    dropped: &Counter,
) {
    let mut failing = false;
    loop {
        let msg = match rx.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Empty) => {
                // Nothing queued: a good moment for the buffer to reach the file, so a reader
                // of a live capture sees records within moments of their completion.
                if let Err(e) = out.flush() {
                    report(&mut failing, path, &e);
                }
                match rx.blocking_recv() {
                    Some(m) => m,
                    None => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match msg {
            Msg::Record(record) => {
                let line = serde_json::to_writer(&mut out, &record)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                match line {
                    Ok(()) => {
                        written.inc();
                        failing = false;
                    }
                    Err(e) => {
                        dropped.inc();
                        report(&mut failing, path, &e);
                    }
                }
            }
            Msg::Close(reply) => {
                rx.close();
                // Records that raced the close are still written.
                while let Ok(Msg::Record(record)) = rx.try_recv() {
                    if serde_json::to_writer(&mut out, &record).is_ok()
                        && out.write_all(b"\n").is_ok()
                    {
                        written.inc();
                    } else {
                        dropped.inc();
                    }
                }
                let _ = reply.send(out.flush());
                return;
            }
        }
    }
    if let Err(e) = out.flush() {
        report(&mut failing, path, &e);
    }
}

/// Logs the first of a run of write errors (a full disk would otherwise log every record).
fn report(failing: &mut bool, path: &str, e: &std::io::Error) {
    if !*failing {
        tracing::error!(file = %path, error = %e, "capture: writing failed; records are dropped until it works again");
    }
    *failing = true;
}
