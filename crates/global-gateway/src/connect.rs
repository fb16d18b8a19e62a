//! Connections to one member endpoint: plain TCP, or TLS over it when the member's URL is
//! `https://` (rustls, checking the certificate against the member's CA file or the platform's
//! trusted CAs, for its server name). One connector per member endpoint, so each pooled client
//! speaks to one member only and the TLS decision is made once, at start-up.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use infergate_config::global::{MemberEndpoint, ResolvedMemberTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// TLS to one endpoint: the client config and the name its certificate must carry.
#[derive(Clone)]
pub(crate) struct MemberTls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for MemberTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberTls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl MemberTls {
    /// The TLS `endpoint` needs under `tls`: `None` for plain HTTP; an error names what could
    /// not be read.
    pub(crate) fn for_endpoint(
        endpoint: &MemberEndpoint,
        tls: &ResolvedMemberTls,
    ) -> Result<Option<Self>, String> {
        if !endpoint.tls {
            return Ok(None);
        }
        let config = match &tls.ca_file {
            None => infergate_control::keys::native_tls()?,
            Some(file) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
                    .map_err(|e| format!("tls.caFile {file}: {e}"))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("tls.caFile {file}: {e}"))?;
                let mut roots = rustls::RootCertStore::empty();
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("tls.caFile {file}: no CA certificate in it"));
                }
                infergate_control::keys::client_tls(roots)?
            }
        };
        let name = tls
            .server_name
            .clone()
            .unwrap_or_else(|| endpoint.host.clone());
        let name = ServerName::try_from(name.clone())
            .map_err(|e| format!("`{name}` is not a server name: {e}"))?;
        Ok(Some(Self {
            connector: TlsConnector::from(Arc::clone(&config)),
            name,
        }))
    }
}

/// Opens connections to one member endpoint.
#[derive(Clone, Debug)]
pub(crate) struct MemberConnector {
    tcp: HttpConnector,
    tls: Option<MemberTls>,
}

impl MemberConnector {
    /// A connector giving up on a connect after `connect_timeout`, over `tls` when given.
    pub(crate) fn new(connect_timeout: Duration, tls: Option<MemberTls>) -> Self {
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.set_keepalive(Some(Duration::from_secs(30)));
        Self { tcp, tls }
    }
}

/// A connection to a member: plain, or TLS.
pub(crate) enum MemberStream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl tower_service::Service<Uri> for MemberConnector {
    type Response = MemberStream;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<MemberStream, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.tcp.call(uri);
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = connecting.await?;
            match tls {
                None => Ok(MemberStream::Plain(tcp)),
                Some(t) => {
                    let stream = t.connector.connect(t.name, tcp.into_inner()).await?;
                    Ok(MemberStream::Tls(Box::new(TokioIo::new(stream))))
                }
            }
        })
    }
}

impl Connection for MemberStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl Read for MemberStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MemberStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MemberStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for MemberStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MemberStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MemberStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MemberStream::Plain(s) => Pin::new(s).poll_flush(cx),
            MemberStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MemberStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MemberStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
