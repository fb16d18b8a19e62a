//! A Prometheus text-format (0.0.4) parser for bytes read from the network.
//!
//! Robustness is the point: every input either parses or returns an error naming the line; no
//! input panics (all slicing is at ASCII delimiters found by scanning, through checked `get`), and
//! the work is linear in the input and bounded by [`Limits`].

use std::borrow::Cow;

use crate::error::ParseError;

/// Bounds on what one exposition may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body accepted, in bytes.
    pub max_bytes: usize,
    /// Most samples accepted.
    pub max_samples: usize,
    /// Most labels on one sample.
    pub max_labels: usize,
}

impl Default for Limits {
    /// 16 MiB, 200,000 samples, 64 labels: a vLLM server exports a few thousand samples.
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            max_samples: 200_000,
            max_labels: 64,
        }
    }
}

/// One sample. Label values borrow from the input unless they contained escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// Metric name, e.g. `vllm:num_requests_waiting` or `…_total` / `…_bucket`.
    pub name: &'a str,
    /// Label pairs in the order written.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    /// The value; NaN and ±Inf are kept as such.
    pub value: f64,
    /// Optional timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

impl Sample<'_> {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// Parses a whole body into samples.
pub fn parse<'a>(body: &'a [u8], limits: &Limits) -> Result<Vec<Sample<'a>>, ParseError> {
    let mut out = Vec::new();
    for_each_sample(body, limits, |s| out.push(s))?;
    Ok(out)
}

/// Parses a body, handing each sample to `f` (no collection of samples the caller skips).
pub fn for_each_sample<'a>(
    body: &'a [u8],
    limits: &Limits,
    mut f: impl FnMut(Sample<'a>),
) -> Result<(), ParseError> {
    if body.len() > limits.max_bytes {
        return Err(ParseError::TooLarge {
            len: body.len(),
            limit: limits.max_bytes,
        });
    }
    let text = std::str::from_utf8(body).map_err(|e| ParseError::NotUtf8(e.valid_up_to()))?;
    let mut count = 0usize;
    for (i, line) in text.split('\n').enumerate() {
        let err = |reason| ParseError::Line {
            line: i + 1,
            reason,
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let Some(sample) = parse_line(line, limits).map_err(err)? else {
            continue;
        };
        count += 1;
        if count > limits.max_samples {
            return Err(ParseError::TooManySamples(limits.max_samples));
        }
        f(sample);
    }
    Ok(())
}

/// A cursor over one line's bytes; every position it holds is on a char boundary because it only
/// ever steps over ASCII bytes or to the end of a scanned run.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn skip_blanks(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A run of bytes accepted by `first` then `rest`; ASCII only, so the slice is valid.
    fn ident(&mut self, first: fn(u8) -> bool, rest: fn(u8) -> bool) -> Option<&'a str> {
        let start = self.pos;
        if !self.peek().is_some_and(first) {
            return None;
        }
        self.pos += 1;
        while self.peek().is_some_and(rest) {
            self.pos += 1;
        }
        self.s.get(start..self.pos)
    }

    /// A run of non-blank bytes (a value or timestamp token).
    fn token(&mut self) -> Option<&'a str> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b != b' ' && b != b'\t') {
            self.pos += 1;
        }
        if self.pos == start {
            None
        } else {
            self.s.get(start..self.pos)
        }
    }

    fn rest(&self) -> &'a str {
        self.s.get(self.pos..).unwrap_or("")
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}
fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn parse_line<'a>(line: &'a str, limits: &Limits) -> Result<Option<Sample<'a>>, &'static str> {
    let mut c = Cursor { s: line, pos: 0 };
    c.skip_blanks();
    match c.peek() {
        None => return Ok(None),
        Some(b'#') => return parse_comment(&mut c).map(|()| None),
        _ => {}
    }
    let name = c
        .ident(is_name_start, is_name_char)
        .ok_or("expected a metric name")?;
    let mut blanks = c.skip_blanks();
    let mut labels = Vec::new();
    if c.peek() == Some(b'{') {
        c.pos += 1;
        parse_labels(&mut c, &mut labels, limits)?;
        blanks = c.skip_blanks();
    }
    if blanks == 0 && c.peek().is_some() {
        return Err("expected a blank before the value");
    }
    let value = parse_value(c.token().ok_or("missing value")?)?;
    c.skip_blanks();
    let timestamp_ms = match c.token() {
        None => None,
        Some(t) => Some(t.parse::<i64>().map_err(|_| "invalid timestamp")?),
    };
    c.skip_blanks();
    if !c.rest().is_empty() {
        return Err("unexpected text after the timestamp");
    }
    Ok(Some(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    }))
}

/// `# HELP name text` and `# TYPE name type` must be well formed; other comments are free text.
fn parse_comment(c: &mut Cursor<'_>) -> Result<(), &'static str> {
    c.pos += 1;
    c.skip_blanks();
    let keyword = c.ident(|b| b.is_ascii_uppercase(), |b| b.is_ascii_uppercase());
    if !matches!(keyword, Some("HELP" | "TYPE")) {
        return Ok(());
    }
    if c.skip_blanks() == 0 {
        return Err("expected a blank after HELP/TYPE");
    }
    c.ident(is_name_start, is_name_char)
        .ok_or("invalid metric name in HELP/TYPE")?;
    if keyword == Some("TYPE") {
        c.skip_blanks();
        let t = c.token().ok_or("missing type")?;
        if !matches!(
            t,
            "counter"
                | "gauge"
                | "histogram"
                | "summary"
                | "untyped"
                | "unknown"
                | "info"
                | "stateset"
                | "gaugehistogram"
        ) {
            return Err("unknown metric type");
        }
    }
    Ok(())
}

fn parse_labels<'a>(
    c: &mut Cursor<'a>,
    labels: &mut Vec<(&'a str, Cow<'a, str>)>,
    limits: &Limits,
) -> Result<(), &'static str> {
    loop {
        c.skip_blanks();
        if c.peek() == Some(b'}') {
            c.pos += 1;
            return Ok(());
        }
        let name = c
            .ident(is_label_start, is_label_char)
            .ok_or("expected a label name or '}'")?;
        c.skip_blanks();
        if c.peek() != Some(b'=') {
            return Err("expected '=' after a label name");
        }
        c.pos += 1;
        c.skip_blanks();
        if c.peek() != Some(b'"') {
            return Err("expected '\"' to open a label value");
        }
        c.pos += 1;
        let value = label_value(c)?;
        if labels.iter().any(|(k, _)| *k == name) {
            return Err("duplicate label name");
        }
        if labels.len() >= limits.max_labels {
            return Err("too many labels");
        }
        labels.push((name, value));
        c.skip_blanks();
        match c.peek() {
            Some(b',') => c.pos += 1,
            Some(b'}') => {}
            _ => return Err("expected ',' or '}' after a label value"),
        }
    }
}

/// Reads up to the closing quote, unescaping `\\`, `\"` and `\n`; any other escaped character
/// is kept with its backslash (as Prometheus does). Borrows when there was nothing to unescape.
fn label_value<'a>(c: &mut Cursor<'a>) -> Result<Cow<'a, str>, &'static str> {
    let start = c.pos;
    let bytes = c.s.as_bytes();
    let mut owned: Option<String> = None;
    let mut run_start = start;
    loop {
        match bytes.get(c.pos) {
            None => return Err("unterminated label value"),
            Some(b'"') => {
                let tail = c.s.get(run_start..c.pos).ok_or("invalid label value")?;
                c.pos += 1;
                return Ok(match owned {
                    Some(mut s) => {
                        s.push_str(tail);
                        Cow::Owned(s)
                    }
                    None => Cow::Borrowed(tail),
                });
            }
            Some(b'\\') => {
                let s = owned.get_or_insert_with(String::new);
                s.push_str(c.s.get(run_start..c.pos).ok_or("invalid label value")?);
                match bytes.get(c.pos + 1) {
                    Some(b'\\') => s.push('\\'),
                    Some(b'"') => s.push('"'),
                    Some(b'n') => s.push('\n'),
                    Some(&b) if b.is_ascii() => {
                        s.push('\\');
                        s.push(char::from(b));
                    }
                    // A backslash before a multi-byte character: keep the backslash, let the
                    // character be copied with the next run.
                    Some(_) => {
                        s.push('\\');
                        c.pos += 1;
                        run_start = c.pos;
                        continue;
                    }
                    None => return Err("unterminated label value"),
                }
                c.pos += 2;
                run_start = c.pos;
            }
            Some(_) => c.pos += 1,
        }
    }
}

fn parse_value(t: &str) -> Result<f64, &'static str> {
    match t {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => t.parse::<f64>().map_err(|_| "invalid value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Sample<'_> {
        let mut v = parse(line.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(v.len(), 1, "{line}");
        v.remove(0)
    }

    #[test]
    fn comments_help_type_and_blank_lines() {
        let body = "# HELP vllm:num_requests_waiting Number of requests waiting.\n\
                    # TYPE vllm:num_requests_waiting gauge\n\
                    \n   # a free comment { with junk\n\
                    vllm:num_requests_waiting{model_name=\"m\"} 3\n";
        let v = parse(body.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].name, "vllm:num_requests_waiting");
        assert_eq!(v[0].label("model_name"), Some("m"));
        assert_eq!(v[0].value, 3.0);
    }

    #[test]
    fn escapes_in_label_values() {
        let s = one(r#"x{a="back\\slash",b="quo\"te",c="new\nline",d="odd\q",e="é"} 1"#);
        assert_eq!(s.label("a"), Some("back\\slash"));
        assert_eq!(s.label("b"), Some("quo\"te"));
        assert_eq!(s.label("c"), Some("new\nline"));
        assert_eq!(s.label("d"), Some("odd\\q"));
        assert_eq!(s.label("e"), Some("é"));
        assert!(matches!(s.labels[4].1, Cow::Borrowed(_)));
    }

    #[test]
    fn special_values_and_timestamps() {
        assert!(one("x NaN").value.is_nan());
        assert_eq!(one("x +Inf").value, f64::INFINITY);
        assert_eq!(one("x -Inf").value, f64::NEG_INFINITY);
        assert_eq!(one("x 1.5e3").value, 1500.0);
        let s = one("x{} 2 1700000000000\r");
        assert_eq!(s.timestamp_ms, Some(1_700_000_000_000));
        assert_eq!(one("x{a=\"1\",} 2").labels.len(), 1);
        assert_eq!(one("x {a=\"1\"}\t2").value, 2.0);
    }

    #[test]
    fn malformed_lines_are_errors_with_their_line_number() {
        let cases = [
            ("x", "missing value"),
            ("x{a=\"1", "unterminated"),
            ("x{a=\"1\"", "expected ',' or '}'"),
            ("x{a=1} 2", "open a label value"),
            ("x{a=\"1\" b=\"2\"} 3", "expected ','"),
            ("x{a=\"1\",a=\"2\"} 3", "duplicate"),
            ("x abc", "invalid value"),
            ("x 1 2 3", "unexpected text"),
            ("x 1 1.5", "invalid timestamp"),
            ("9x 1", "metric name"),
            ("# TYPE x flavour", "unknown metric type"),
            ("x{a=\"1\"}2", "blank before the value"),
        ];
        for (line, want) in cases {
            let body = format!("ok 1\n{line}\n");
            match parse(body.as_bytes(), &Limits::default()) {
                Err(ParseError::Line { line: 2, reason }) => {
                    assert!(reason.contains(want), "{line:?}: {reason}")
                }
                other => panic!("{line:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn limits_bound_the_work() {
        let limits = Limits {
            max_bytes: 64,
            max_samples: 2,
            max_labels: 1,
        };
        assert!(matches!(
            parse(&[b'x'; 65], &limits),
            Err(ParseError::TooLarge { len: 65, limit: 64 })
        ));
        assert_eq!(
            parse(b"a 1\nb 2\nc 3\n", &limits),
            Err(ParseError::TooManySamples(2))
        );
        assert!(matches!(
            parse(b"a{x=\"1\",y=\"2\"} 1", &limits),
            Err(ParseError::Line {
                reason: "too many labels",
                ..
            })
        ));
        assert_eq!(
            parse(&[b'a', b' ', 0xff], &limits),
            Err(ParseError::NotUtf8(2))
        );
    }
}
