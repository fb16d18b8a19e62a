//! What `infergate check` prints for a `GlobalGatewayConfig`: every setting in effect, defaults
//! marked, one member per line.

use std::fmt::{self, Display, Formatter};

use super::resolve::{MemberCost, ResolvedGlobal};
use super::GLOBAL_KIND;
use crate::gateway::{fmt_rate_limits, fmt_tenancy, GatewayDuration, API_VERSION};

/// The key column's width: the cluster report's, since the callers' rows are printed by its code.
const W: usize = 18;

fn row(f: &mut Formatter<'_>, key: &str, value: impl Display) -> fmt::Result {
    writeln!(f, "  {key:<W$}{value}")
}

fn d(s: crate::gateway::Setting<std::time::Duration>) -> impl Display {
    s.map(GatewayDuration::from_duration)
}

impl Display for ResolvedGlobal {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{GLOBAL_KIND} {} ({API_VERSION})",
            self.name.as_deref().unwrap_or("(unnamed)")
        )?;
        writeln!(f)?;
        writeln!(f, "global tier")?;
        row(f, "listen", self.listen)?;
        row(f, "admin", self.admin_listen)?;
        row(
            f,
            "region",
            self.region
                .as_deref()
                .unwrap_or("(none: callers without the header are near no member)"),
        )?;
        row(f, "region header", &self.region_header)?;
        for (a, b, l) in self.region_latencies.iter() {
            row(
                f,
                "region latency",
                format!("{a} <-> {b}: {}", GatewayDuration::from_duration(l)),
            )?;
        }
        writeln!(f)?;
        writeln!(f, "members")?;
        for m in &self.members {
            let cost = match m.cost {
                None => String::new(),
                Some(MemberCost::PerGpuHour(p)) => format!(", {p} per GPU-hour"),
                Some(MemberCost::Tier(t)) => format!(", cost tier {t}"),
            };
            let zone = m
                .zone
                .as_deref()
                .map(|z| format!("/{z}"))
                .unwrap_or_default();
            let token = if m.bearer_token_file.is_some() {
                ", bearer token from file"
            } else {
                ""
            };
            row(
                f,
                &m.name,
                format!(
                    "data {} admin {} region {}{zone}, weight {}{cost}{token}",
                    m.data.authority, m.admin.authority, m.region, m.weight
                ),
            )?;
        }
        writeln!(f)?;
        writeln!(f, "status pulls")?;
        row(f, "interval", d(self.status.interval))?;
        row(f, "timeout", d(self.status.timeout))?;
        row(f, "misses to stale", self.status.misses_before_stale)?;
        row(f, "pulls to return", self.status.pulls_before_return)?;
        writeln!(f)?;
        writeln!(f, "routing")?;
        let w = self.routing.weights;
        row(
            f,
            "weights",
            w.map(|w| {
                format!(
                    "kvHeadroom {} queueDepth {} regionProximity {} errorRate {}",
                    w.kv_headroom, w.queue_depth, w.region_proximity, w.error_rate
                )
            }),
        )?;
        row(f, "spill at", self.routing.spill_at)?;
        row(f, "max attempts", self.routing.max_attempts)?;
        row(f, "connect timeout", d(self.routing.connect_timeout))?;
        row(f, "first-byte wait", d(self.routing.first_byte_timeout))?;
        writeln!(f)?;
        writeln!(f, "outlier detection")?;
        row(f, "eject after", self.outlier.consecutive_failures)?;
        row(f, "base ejection", d(self.outlier.base_ejection_time))?;
        row(f, "max ejection", d(self.outlier.max_ejection_time))?;
        writeln!(f)?;
        writeln!(f, "slow start")?;
        row(f, "window", d(self.slow_start.window))?;
        row(f, "aggression", self.slow_start.aggression)?;
        row(
            f,
            "min weight",
            self.slow_start
                .min_weight
                .map(|m| format!("{:.0} %", m * 100.0)),
        )?;
        writeln!(f)?;
        writeln!(f, "callers")?;
        match &self.auth {
            None => row(f, "auth", "off")?,
            Some(p) => row(
                f,
                "auth",
                format!("JWT provider {}: issuer {}", p.name, p.issuer),
            )?,
        }
        fmt_tenancy(f, &self.tenancy)?;
        fmt_rate_limits(f, self.rate_limits.as_ref())
    }
}
