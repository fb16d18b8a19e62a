//! The global tier's front (`infergate global`): one OpenAI-compatible endpoint over member
//! gateways. Each member's status is pulled ([`pull`]), each request is sent to the best member
//! and moved to the next when one fails before answering ([`proxy`]), and the admin listener
//! shows the members as the tier sees them ([`admin`]). The decisions are
//! `infergate-global-picker`'s; `docs/global.md` describes the tier.
#![forbid(unsafe_code)]

mod admin;
mod connect;
mod proxy;
mod pull;
mod tier;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use infergate_config::global::ResolvedGlobal;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub use proxy::{MAX_BODY_BYTES, MEMBER_HEADER};

/// Why the tier did not start.
#[derive(Debug, thiserror::Error)]
pub enum GlobalError {
    /// A listener could not bind.
    #[error("binding {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
    /// `spec.auth` or `spec.rateLimits` could not be set up.
    #[error(transparent)]
    Callers(#[from] infergate_control::GatewayError),
    /// A member's TLS could not be set up (its CA file, its server name).
    #[error("spec.members[{index}].tls: {reason}")]
    Tls {
        /// The member's index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A member's token file could not be read.
    #[error("spec.members[{index}].bearerTokenFile {file}: {cause}")]
    Token {
        /// The member's index.
        index: usize,
        /// The file.
        file: String,
        /// Why.
        cause: std::io::Error,
    },
}

/// A running tier; dropping it stops every task.
#[derive(Debug)]
pub struct GlobalGateway {
    /// The data plane's bound address.
    pub listen: SocketAddr,
    /// The admin listener's bound address.
    pub admin: SocketAddr,
    tasks: JoinSet<()>,
}

impl GlobalGateway {
    /// Binds both listeners, reads the members' tokens and starts pulling and serving on the
    /// current runtime. `listen` and `admin` override the config's addresses.
    pub async fn start(
        config: ResolvedGlobal,
        config_dir: Option<&std::path::Path>,
        listen: Option<SocketAddr>,
        admin: Option<SocketAddr>,
    ) -> Result<Self, GlobalError> {
        let metrics = Arc::new(infergate_telemetry::Metrics::new());
        let auth = match &config.auth {
            None => None,
            Some(provider) => {
                let auth = infergate_control::keys::Auth::build(
                    provider,
                    config_dir,
                    None,
                    infergate_control::keys::JwksRefresh::default(),
                    &metrics,
                )?;
                // As serve does: wait a little for the first key set, then serve either way
                // (tokens get 503 until one loads).
                auth.keys()
                    .wait_loaded(infergate_control::keys::FIRST_LOAD_WAIT)
                    .await;
                Some(Arc::new(auth))
            }
        };
        let limits = infergate_control::limits::RateLimits::for_limits(
            config.rate_limits.as_ref(),
            None,
            infergate_control::Clock::new(),
            &metrics,
        )?;
        if let Some(l) = &limits {
            l.probe().await;
        }
        let callers = tier::Callers {
            auth,
            limits,
            metrics,
        };
        let mut addresses = Vec::with_capacity(config.members.len());
        for (index, m) in config.members.iter().enumerate() {
            let authorization = tier::authorization(m).map_err(|cause| GlobalError::Token {
                index,
                file: m.bearer_token_file.clone().unwrap_or_default(),
                cause,
            })?;
            let tls = |endpoint| {
                connect::MemberTls::for_endpoint(endpoint, &m.tls)
                    .map_err(|reason| GlobalError::Tls { index, reason })
            };
            addresses.push(tier::MemberAddress::new(
                m,
                authorization,
                (tls(&m.data)?, tls(&m.admin)?),
                config.routing.connect_timeout.value,
                config.status.timeout.value,
            ));
        }
        let listen = listen.unwrap_or(config.listen.value);
        let admin = admin.unwrap_or(config.admin_listen.value);
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|cause| GlobalError::Bind { addr, cause })
        };
        let data_listener = bind(listen).await?;
        let admin_listener = bind(admin).await?;
        let listen = data_listener
            .local_addr()
            .map_err(|cause| GlobalError::Bind {
                addr: listen,
                cause,
            })?;
        let admin = admin_listener
            .local_addr()
            .map_err(|cause| GlobalError::Bind { addr: admin, cause })?;
        // Seeded from the clock: each replica of the tier jitters and ramps on its own draw.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let tier = Arc::new(tier::Tier::new(config, addresses, callers, seed));
        let mut tasks = JoinSet::new();
        for index in 0..tier.addresses.len() {
            let t = Arc::clone(&tier);
            tasks.spawn(pull::pull_forever(
                t,
                index,
                seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ));
        }
        let t = Arc::clone(&tier);
        tasks.spawn(accept(data_listener, move |req| {
            let t = Arc::clone(&t);
            async move { Ok::<_, Infallible>(proxy::handle(t, req).await) }
        }));
        let t = Arc::clone(&tier);
        tasks.spawn(accept(admin_listener, move |req| {
            let t = Arc::clone(&t);
            async move { Ok::<_, Infallible>(admin::handle(&t, &req)) }
        }));
        tracing::info!(%listen, %admin, members = tier.addresses.len(), "global tier serving");
        Ok(Self {
            listen,
            admin,
            tasks,
        })
    }

    /// Runs until a task ends (none does unless the runtime stops).
    pub async fn wait(mut self) {
        let _ = self.tasks.join_next().await;
    }
}

/// Reads every member's status document once (`infergate check --pull-members`), each within
/// `timeout`, with the members' tokens read from their files: each member's name and its
/// document or why there is none, then the drift among those read.
pub async fn read_members(
    config: &ResolvedGlobal,
    timeout: std::time::Duration,
) -> (
    Vec<(
        String,
        Result<infergate_global_picker::MemberStatus, String>,
    )>,
    Vec<infergate_global_picker::Drift>,
) {
    let reads = config.members.iter().map(|m| async move {
        let token = tier::authorization(m).map_err(|e| {
            format!(
                "bearerTokenFile {}: {e}",
                m.bearer_token_file.as_deref().unwrap_or_default()
            )
        });
        let read = match (token, connect::MemberTls::for_endpoint(&m.admin, &m.tls)) {
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(authorization), Ok(tls)) => {
                let address =
                    tier::MemberAddress::new(m, authorization, (None, tls), timeout, timeout);
                pull::fetch(&address.status_client, &address, timeout).await
            }
        };
        (m.name.clone(), read)
    });
    let read = futures_util::future::join_all(reads).await;
    let drift = infergate_global_picker::drift(
        read.iter()
            .filter_map(|(name, r)| r.as_ref().ok().map(|s| (name.as_str(), s))),
    );
    (read, drift)
}

/// Accepts connections on `listener` and serves each with `handler`.
async fn accept<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<hyper::Response<proxy::ProxyBody>, Infallible>>
        + Send
        + 'static,
{
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let served = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service_fn(handler))
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}
