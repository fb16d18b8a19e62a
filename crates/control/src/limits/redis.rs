//! The shared rate-limit store: bucket levels in Redis, updated by one Lua script
//! (`limit.lua`) so that every take and adjust is atomic across gateway replicas and measured
//! on Redis's clock.
//!
//! A few pooled connections, each used by one call at a time; every call — connecting,
//! authenticating, the script — runs under one hard timeout. A connection whose call failed or
//! timed out is dropped (a reply may still be on its way), and after any failure the store
//! answers at once with an error for [`RETRY_DELAY`], so a dead Redis costs requests nothing
//! but the configured fail-open or fail-closed, instead of a timeout each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use infergate_flow::limit::{
    Bucket, Charge, Level, LimitKind, LimitStore, Refusal, RefusedBy, Taken,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::resp::{self, Value};
pub use super::target::Target;

/// The script, and the SHA-1 EVALSHA names it by.
const SCRIPT: &str = include_str!("limit.lua");

/// Connections kept open: enough that a few concurrent requests do not queue behind one
/// round trip; each call holds one for well under a millisecond.
pub const POOL_SIZE: usize = 4;

/// After a failure, how long calls fail at once before the next attempt.
pub const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Prefix of every key the store writes.
pub const KEY_PREFIX: &str = "infergate:ratelimit:";

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// No answer within the store timeout.
    #[error("no answer from Redis within {0:?}")]
    Timeout(Duration),
    /// Connecting, writing or reading failed.
    #[error("Redis connection: {0}")]
    Io(std::io::Error),
    /// Redis refused a command.
    #[error("Redis refused: {0}")]
    Server(String),
    /// Redis answered something this client does not understand.
    #[error("Redis answered outside the protocol: {0}")]
    Protocol(String),
    /// A recent call failed; the next attempt is after [`RETRY_DELAY`].
    #[error("Redis failed moments ago (next attempt within {RETRY_DELAY:?})")]
    Down,
}

/// The cause is in the message, not a `source()`, so a chain printer shows it once.
impl From<std::io::Error> for RedisError {
    fn from(e: std::io::Error) -> Self {
        RedisError::Io(e)
    }
}

impl RedisError {
    /// A short label for metrics: `timeout`, `connection`, `refused`, `protocol` or `down`.
    pub fn reason(&self) -> &'static str {
        match self {
            RedisError::Timeout(_) => "timeout",
            RedisError::Io(_) => "connection",
            RedisError::Server(_) => "refused",
            RedisError::Protocol(_) => "protocol",
            RedisError::Down => "down",
        }
    }
}

/// One connection and the bytes read past the last reply.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(target: &Target) -> Result<Conn, RedisError> {
        let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
        stream.set_nodelay(true)?;
        let mut conn = Conn {
            stream,
            buf: Vec::new(),
        };
        if let Some(pw) = &target.password {
            let reply = match &target.user {
                Some(user) => {
                    conn.call(&[b"AUTH", user.as_bytes(), pw.as_bytes()])
                        .await?
                }
                None => conn.call(&[b"AUTH", pw.as_bytes()]).await?,
            };
            ok(reply)?;
        }
        if target.db != 0 {
            ok(conn
                .call(&[b"SELECT", target.db.to_string().as_bytes()])
                .await?)?;
        }
        Ok(conn)
    }

    /// Sends one command and reads its reply; a server error is `Server`.
    async fn call(&mut self, args: &[&[u8]]) -> Result<Value, RedisError> {
        let mut out = Vec::new();
        resp::encode(args, &mut out);
        self.stream.write_all(&out).await?;
        loop {
            match resp::parse(&self.buf) {
                Ok(Some((value, used))) => {
                    self.buf.drain(..used);
                    return match value {
                        Value::Error(e) => Err(RedisError::Server(e)),
                        v => Ok(v),
                    };
                }
                Ok(None) => {}
                Err(e) => return Err(RedisError::Protocol(e.to_string())),
            }
            let mut chunk = [0u8; 512];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(RedisError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn ok(reply: Value) -> Result<(), RedisError> {
    match reply {
        Value::Simple(s) if s == "OK" => Ok(()),
        other => Err(RedisError::Protocol(format!("expected OK, got {other:?}"))),
    }
}

/// Bucket levels in Redis, shared by every gateway pointed at it.
#[derive(Debug)]
pub struct RedisStore {
    target: Target,
    timeout: Duration,
    sha: String,
    slots: Vec<tokio::sync::Mutex<Option<Conn>>>,
    next: AtomicUsize,
    retry_at: Mutex<Option<Instant>>,
}

impl RedisStore {
    /// A store for `url` whose calls each take at most `timeout`. Connects on first use.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, String> {
        let digest =
            ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, SCRIPT.as_bytes());
        let sha = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self {
            target: Target::parse(url)?,
            timeout,
            sha,
            slots: (0..POOL_SIZE)
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            retry_at: Mutex::new(None),
        })
    }

    /// Where it connects (without credentials).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The hard timeout of one call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `args` on a pooled connection under the hard timeout. A connection is taken out of
    /// its slot for the call and put back only after a whole reply, so a call cut short by the
    /// timeout never leaves a half-read connection for the next.
    pub async fn call(&self, args: &[&[u8]]) -> Result<Value, RedisError> {
        let now = Instant::now();
        if self.lock_retry().is_some_and(|at| now < at) {
            return Err(RedisError::Down);
        }
        let result = tokio::time::timeout(self.timeout, self.call_pooled(args))
            .await
            .unwrap_or(Err(RedisError::Timeout(self.timeout)));
        match &result {
            // A server's refusal of one command says nothing about the connection.
            Ok(_) | Err(RedisError::Server(_)) => *self.lock_retry() = None,
            Err(_) => *self.lock_retry() = Some(Instant::now() + RETRY_DELAY),
        }
        result
    }

    fn lock_retry(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.retry_at.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn call_pooled(&self, args: &[&[u8]]) -> Result<Value, RedisError> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.slots.len();
        let free = (0..n).find_map(|i| self.slots[(start + i) % n].try_lock().ok());
        let mut slot = match free {
            Some(s) => s,
            None => self.slots[start % n].lock().await,
        };
        let mut conn = match slot.take() {
            Some(c) => c,
            None => Conn::open(&self.target).await?,
        };
        let reply = conn.call(args).await;
        if matches!(reply, Ok(_) | Err(RedisError::Server(_))) {
            *slot = Some(conn);
        }
        reply
    }

    /// Runs the script: EVALSHA, and EVAL when Redis does not have it cached yet (a fresh or
    /// restarted Redis), which caches it for the next EVALSHA.
    async fn script(&self, keys: &[String], args: &[String]) -> Result<Vec<i64>, RedisError> {
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVALSHA", self.sha.as_bytes(), numkeys.as_bytes()];
        argv.extend(keys.iter().map(|k| k.as_bytes()));
        argv.extend(args.iter().map(|a| a.as_bytes()));
        let reply = match self.call(&argv).await {
            Err(RedisError::Server(e)) if e.starts_with("NOSCRIPT") => {
                argv[0] = b"EVAL";
                argv[1] = SCRIPT.as_bytes();
                self.call(&argv).await?
            }
            other => other?,
        };
        match reply {
            Value::Array(Some(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::Integer(i) => Ok(i),
                    other => Err(RedisError::Protocol(format!("script answered {other:?}"))),
                })
                .collect(),
            other => Err(RedisError::Protocol(format!("script answered {other:?}"))),
        }
    }

    /// The key of `tenant`'s `kind` bucket.
    pub fn key(tenant: &str, kind: LimitKind) -> String {
        format!("{KEY_PREFIX}{}:{tenant}", kind.as_str())
    }

    /// [`LimitStore::take`] on Redis's clock (`now_ms: None`, what the gateway does) or on the
    /// caller's (tests compare the script with the Rust it mirrors).
    pub async fn take_at(
        &self,
        tenant: &str,
        charges: &[Charge],
        now_ms: Option<u64>,
    ) -> Result<Taken, RedisError> {
        let keys: Vec<String> = charges.iter().map(|c| Self::key(tenant, c.kind)).collect();
        let mut args = vec!["take".to_owned(), clock(now_ms)];
        for c in charges {
            args.push(c.bucket.limit().to_string());
            args.push(c.bucket.period_ms().to_string());
            args.push(c.cost.to_string());
        }
        match self.script(&keys, &args).await?.as_slice() {
            [1, _, _] => Ok(Taken::Admitted),
            [0, i, wait] => {
                let charge = usize::try_from(*i - 1)
                    .ok()
                    .and_then(|i| charges.get(i))
                    .ok_or_else(|| RedisError::Protocol(format!("script named charge {i}")))?;
                Ok(Taken::Refused(Refusal {
                    by: RefusedBy::Limit(charge.kind),
                    wait_ms: u64::try_from(*wait).ok(),
                }))
            }
            other => Err(RedisError::Protocol(format!("script answered {other:?}"))),
        }
    }

    /// [`LimitStore::adjust`] on Redis's clock or the caller's (see [`RedisStore::take_at`]).
    pub async fn adjust_at(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        now_ms: Option<u64>,
    ) -> Result<(), RedisError> {
        let args = [
            "adjust".to_owned(),
            clock(now_ms),
            bucket.limit().to_string(),
            bucket.period_ms().to_string(),
            delta.to_string(),
        ];
        self.script(&[Self::key(tenant, kind)], &args)
            .await
            .map(drop)
    }

    /// The level stored for `tenant`'s `kind` bucket (empty when there is no key).
    pub async fn level(&self, tenant: &str, kind: LimitKind) -> Result<Level, RedisError> {
        let key = Self::key(tenant, kind);
        let reply = self.call(&[b"HMGET", key.as_bytes(), b"l", b"a"]).await?;
        let field = |v: Option<&Value>| match v {
            Some(Value::Bulk(Some(b))) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| RedisError::Protocol(format!("level field {b:?}"))),
            Some(Value::Bulk(None)) => Ok(0),
            other => Err(RedisError::Protocol(format!("level field {other:?}"))),
        };
        match reply {
            Value::Array(Some(items)) => Ok(Level {
                units: field(items.first())?,
                at_ms: field(items.get(1))?,
            }),
            other => Err(RedisError::Protocol(format!("HMGET answered {other:?}"))),
        }
    }

    /// Whether Redis answers now (`PING`).
    pub async fn ping(&self) -> Result<(), RedisError> {
        match self.call(&[b"PING"]).await? {
            Value::Simple(s) if s == "PONG" => Ok(()),
            other => Err(RedisError::Protocol(format!("PING answered {other:?}"))),
        }
    }
}

fn clock(now_ms: Option<u64>) -> String {
    now_ms.map(|t| t.to_string()).unwrap_or_default()
}

impl LimitStore for RedisStore {
    type Error = RedisError;

    fn take(
        &self,
        tenant: &str,
        charges: &[Charge],
        _now: Duration,
    ) -> impl std::future::Future<Output = Result<Taken, RedisError>> + Send {
        self.take_at(tenant, charges, None)
    }

    fn adjust(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        _now: Duration,
    ) -> impl std::future::Future<Output = Result<(), RedisError>> + Send {
        self.adjust_at(tenant, kind, bucket, delta, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_redis_fails_fast_after_the_first_failure() {
        // A port nothing listens on: connection refused at once.
        let port = infergate_test_support::ports::free_port();
        let store =
            RedisStore::new(&format!("redis://127.0.0.1:{port}"), Duration::from_secs(1)).unwrap();
        let first = store.ping().await.unwrap_err();
        assert_eq!(first.reason(), "connection");
        let second = store.ping().await.unwrap_err();
        assert_eq!(second.reason(), "down");
    }

    #[tokio::test]
    async fn a_redis_that_never_answers_times_out() {
        // Accepts the connection, then says nothing.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(s);
        });
        let store = RedisStore::new(&format!("redis://{addr}"), Duration::from_millis(50)).unwrap();
        let t0 = std::time::Instant::now();
        let e = store.ping().await.unwrap_err();
        assert_eq!(e.reason(), "timeout");
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        held.abort();
    }
}
