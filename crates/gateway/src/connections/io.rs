//! The client socket, recording into its [`Activity`] every byte read and every write the
//! client's socket would not take, for the watchdog's clocks.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;

/// A socket whose activity is recorded.
#[derive(Debug)]
pub struct WatchedIo<T> {
    inner: T,
    activity: Arc<Activity>,
    /// Tell HTTP/1 from HTTP/2 by the first bytes (plain TCP; under TLS the ALPN says).
    detect: bool,
}

impl<T> WatchedIo<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, activity: Arc<Activity>, detect: bool) -> Self {
        WatchedIo {
            inner,
            activity,
            detect,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = &buf.filled()[before..];
            if !read.is_empty() {
                this.activity.read(read.len(), read, this.detect);
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.record(&polled);
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.record(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T> WatchedIo<T> {
    fn record(&self, polled: &Poll<io::Result<usize>>) {
        match polled {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.wrote(),
            Poll::Ready(_) => {}
        }
    }
}
