//! SVG line charts, written by hand: the TTFT distribution of each policy and each pod's queue
//! over time. Plain SVG 1.1 that any browser or Markdown viewer renders; no plotting dependency.

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 48.0;

/// Distinguishable line colours (Okabe–Ito, safe for colour-blind readers), cycled.
const COLOURS: [&str; 8] = [
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
];

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points in data units, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// How the x axis maps data to the page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XScale {
    /// Linear from 0.
    Linear,
    /// Base-10 logarithmic (values ≤ 0 are clamped to the smallest positive one).
    Log,
}

/// The cumulative distribution of each policy's TTFTs (milliseconds), x on a log scale.
pub fn ttft_cdf(title: &str, ttfts_ms: &[(String, Vec<f64>)]) -> String {
    let series: Vec<Series> = ttfts_ms
        .iter()
        .map(|(name, values)| {
            let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len().max(1) as f64;
            // At most ~400 points per line: every k-th sample plus the last.
            let step = (v.len() / 400).max(1);
            let mut points: Vec<(f64, f64)> = v
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == v.len())
                .map(|(i, &x)| (x.max(0.1), (i + 1) as f64 / n))
                .collect();
            points.dedup();
            Series {
                name: name.clone(),
                points,
            }
        })
        .collect();
    line_chart(
        title,
        "TTFT (ms, log scale)",
        "fraction of requests",
        &series,
        XScale::Log,
    )
}

/// Each replica's waiting queue over time, averaged per second: `samples` are
/// `(seconds, replica, waiting)`.
pub fn queues(title: &str, samples: &[(f64, u32, u32)], replica_names: &[String]) -> String {
    let mut sums: Vec<Vec<(f64, f64)>> = vec![Vec::new(); replica_names.len()];
    for &(t, replica, waiting) in samples {
        let Some(line) = sums.get_mut(replica as usize) else {
            continue;
        };
        let second = t.floor();
        match line.last_mut() {
            Some((s, _)) if *s == second => {}
            _ => line.push((second, 0.0)),
        }
        if let Some(last) = line.last_mut() {
            last.1 += f64::from(waiting);
        }
    }
    // Sums per second back to means: count the samples of each (replica, second).
    let mut counts: Vec<Vec<f64>> = sums.iter().map(|l| vec![0.0; l.len()]).collect();
    for &(t, replica, _) in samples {
        let (Some(line), Some(c)) = (sums.get(replica as usize), counts.get_mut(replica as usize))
        else {
            continue;
        };
        if let Ok(i) = line.binary_search_by(|(s, _)| s.total_cmp(&t.floor())) {
            c[i] += 1.0;
        }
    }
    let series: Vec<Series> = sums
        .into_iter()
        .zip(counts)
        .zip(replica_names)
        .map(|((line, c), name)| Series {
            name: name.clone(),
            points: line
                .into_iter()
                .zip(c)
                .map(|((s, sum), n)| (s, sum / n.max(1.0)))
                .collect(),
        })
        .collect();
    line_chart(
        title,
        "time (s)",
        "waiting requests (mean per second)",
        &series,
        XScale::Linear,
    )
}

/// A line chart of `series`.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_scale: XScale,
) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0_f64);
    for &(x, y) in all {
        if x.is_finite() && y.is_finite() {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
    }
    if !x_min.is_finite() {
        (x_min, x_max) = (0.0, 1.0);
    }
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    let fx = Axis::new(x_min, x_max, x_scale, LEFT, WIDTH - RIGHT);
    let fy = Axis::new(0.0, y_max, XScale::Linear, HEIGHT - BOTTOM, TOP);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        escape(title)
    );
    for (value, label) in fx.ticks() {
        let x = fx.map(value);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 16.0
        );
    }
    for (value, label) in fy.ticks() {
        let y = fy.map(value);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="14" y="{:.1}" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 10.0,
        escape(x_label),
        (TOP + HEIGHT - BOTTOM) / 2.0,
        (TOP + HEIGHT - BOTTOM) / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut path = String::new();
        for &(x, y) in &s.points {
            let _ = write!(path, "{:.1},{:.1} ", fx.map(x), fy.map(y));
        }
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            path.trim_end()
        );
        let ly = TOP + 16.0 * i as f64;
        let lx = WIDTH - RIGHT + 12.0;
        let _ = write!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One axis: data range to page range.
struct Axis {
    lo: f64,
    hi: f64,
    scale: XScale,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, scale: XScale, from: f64, to: f64) -> Self {
        let (lo, hi) = match scale {
            XScale::Log => {
                let lo = lo.max(1e-3);
                (lo.log10().floor(), hi.max(lo * 10.0).log10().ceil())
            }
            XScale::Linear => {
                // Round the top up to a whole number of 1, 2 or 5 × 10^k steps.
                let hi = if hi > lo { hi } else { lo + 1.0 };
                let step = nice_step((hi - lo) / 5.0);
                (lo, lo + ((hi - lo) / step).ceil() * step)
            }
        };
        Self {
            lo,
            hi,
            scale,
            from,
            to,
        }
    }

    fn unit(&self, v: f64) -> f64 {
        match self.scale {
            XScale::Log => v.max(1e-3).log10(),
            XScale::Linear => v,
        }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (self.unit(v) - self.lo) / (self.hi - self.lo);
        self.from + t.clamp(0.0, 1.0) * (self.to - self.from)
    }

    /// Tick values and labels: each power of ten on a log axis, five steps on a linear one.
    fn ticks(&self) -> Vec<(f64, String)> {
        match self.scale {
            XScale::Log => {
                let (lo, hi) = (self.lo as i32, self.hi as i32);
                (lo..=hi)
                    .map(|e| {
                        let v = 10f64.powi(e);
                        (v, number(v))
                    })
                    .collect()
            }
            XScale::Linear => {
                let step = nice_step((self.hi - self.lo) / 5.0);
                let n = ((self.hi - self.lo) / step).round() as i32;
                (0..=n)
                    .map(|i| {
                        let v = self.lo + step * f64::from(i);
                        (v, number(v))
                    })
                    .collect()
            }
        }
    }
}

/// The smallest 1, 2 or 5 × 10^k at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

fn number(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_has_one_line_per_policy_ending_at_one_and_escapes_names() {
        let svg = ttft_cdf(
            "a <b> & c",
            &[
                ("p1".into(), vec![10.0, 20.0, 30.0, 40.0]),
                ("p<2>".into(), vec![100.0, 1000.0]),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt; &amp; c") && svg.contains("p&lt;2&gt;"));
        // Log axis from 10 to 1000: ticks at each power of ten.
        for t in [">10<", ">100<", ">1000<"] {
            assert!(svg.contains(t), "{t}");
        }
        // Both lines reach the top of the chart (fraction 1).
        let top = format!(",{:.1}", TOP);
        assert_eq!(svg.matches(&top).count(), 2, "{svg}");
    }

    #[test]
    fn queues_are_averaged_per_second_per_replica() {
        let samples = [
            (0.1, 0, 2),
            (0.6, 0, 4),
            (1.2, 0, 10),
            (0.3, 1, 1),
            (1.5, 1, 1),
        ];
        let svg = queues("q", &samples, &["a".into(), "b".into()]);
        assert_eq!(svg.matches("<polyline").count(), 2);
        // Replica a: means 3 then 10 — y max 10, so its second point sits at the top.
        let fy = Axis::new(0.0, 10.0, XScale::Linear, HEIGHT - BOTTOM, TOP);
        let fx = Axis::new(0.0, 1.0, XScale::Linear, LEFT, WIDTH - RIGHT);
        let a = format!(
            "{:.1},{:.1} {:.1},{:.1}",
            fx.map(0.0),
            fy.map(3.0),
            fx.map(1.0),
            fy.map(10.0)
        );
        assert!(svg.contains(&a), "{svg}");
    }

    #[test]
    fn linear_ticks_are_round_numbers() {
        assert_eq!(nice_step(0.9), 1.0);
        assert_eq!(nice_step(11.8), 20.0);
        assert_eq!(nice_step(55.8), 100.0);
        assert_eq!(nice_step(4.0), 5.0);
        let a = Axis::new(0.0, 279.0, XScale::Linear, 0.0, 1.0);
        let ticks: Vec<f64> = a.ticks().into_iter().map(|(v, _)| v).collect();
        assert_eq!(ticks, vec![0.0, 100.0, 200.0, 300.0]);
    }

    #[test]
    fn points_map_inside_the_plot_area() {
        let a = Axis::new(0.0, 50.0, XScale::Linear, LEFT, WIDTH - RIGHT);
        assert_eq!(a.map(0.0), LEFT);
        assert_eq!(a.map(50.0), WIDTH - RIGHT);
        assert_eq!(a.map(1e9), WIDTH - RIGHT);
        let l = Axis::new(3.0, 700.0, XScale::Log, 0.0, 100.0);
        assert!((l.map(1.0) - 0.0).abs() < 1e-9 && (l.map(1000.0) - 100.0).abs() < 1e-9);
    }
}
