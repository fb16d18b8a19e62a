//! What a simulated answer says and how long it is: deterministic words, one per token, and an
//! output length drawn from a seeded geometric distribution (an end-of-sequence token that
//! comes with the same chance at every position).

use infergate_engine::tokens::mix;
use infergate_engine::FinishReason;
use infergate_rng::SplitMix64;

/// Words the simulated model writes; each is one token.
const WORDS: &[&str] = &[
    "the",
    "model",
    "server",
    "routes",
    "each",
    "request",
    "to",
    "a",
    "replica",
    "with",
    "warm",
    "cache",
    "and",
    "short",
    "queue",
    "so",
    "that",
    "tokens",
    "flow",
    "fast",
    "while",
    "prefill",
    "shares",
    "blocks",
    "across",
    "users",
    "who",
    "ask",
    "similar",
    "questions",
    "about",
    "GPUs",
    "batches",
    "grow",
    "when",
    "load",
    "rises",
    "but",
    "latency",
    "stays",
    "low",
    "if",
    "the",
    "gateway",
    "picks",
    "well",
    "every",
    "time",
    "it",
    "reads",
    "fresh",
    "metrics",
    "from",
    "pods",
    "in",
    "its",
    "pool",
    "of",
    "engines",
    "under",
    "steady",
    "traffic",
    "today",
    "now",
];

/// The planned length of an answer and why it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputPlan {
    pub tokens: u32,
    pub finish: FinishReason,
}

/// Plans an answer: exactly `cap` tokens with `ignore_eos`, otherwise a geometric draw with
/// mean `mean` that ends with `stop`, or at `cap` with `length` if it would run past it.
pub(crate) fn plan_output(
    rng: &mut SplitMix64,
    mean: f64,
    cap: u32,
    ignore_eos: bool,
) -> OutputPlan {
    let cap = cap.max(1);
    if ignore_eos {
        return OutputPlan {
            tokens: cap,
            finish: FinishReason::Length,
        };
    }
    // P(L = k) = (1 - p)^(k - 1) p, drawn by inverting the CDF.
    let p = (1.0 / mean.max(1.0)).clamp(1e-9, 1.0);
    let u = 1.0 - rng.next_f64(); // in (0, 1]
    let drawn = if p >= 1.0 {
        1.0
    } else {
        (u.ln() / (1.0 - p).ln()).ceil().max(1.0)
    };
    if drawn > f64::from(cap) {
        OutputPlan {
            tokens: cap,
            finish: FinishReason::Length,
        }
    } else {
        OutputPlan {
            tokens: drawn as u32,
            finish: FinishReason::Stop,
        }
    }
}

/// What a simulated answer of `tokens` tokens with `seed` says: the text of a request with
/// that `seed` (and `ignore_eos`, or a length its seed drew), whole, however many endpoints it
/// was streamed from.
pub fn seeded_answer(seed: u64, tokens: u32) -> String {
    Words::new(seed).text(tokens)
}

/// The words of one answer: word `i` is a pure function of the answer's seed and `i`, so a
/// stream and a non-streamed answer with the same seed say the same thing, and an answer
/// continued from word `k` ([`Words::from_word`]) says what the whole one would have after `k`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Words {
    seed: u64,
    /// Index of the answer's first word.
    first: u32,
}

impl Words {
    pub fn new(seed: u64) -> Words {
        Words { seed, first: 0 }
    }

    /// The words of `seed`'s answer from word `first` on.
    pub fn from_word(seed: u64, first: u32) -> Words {
        Words { seed, first }
    }

    /// Output token `index` (counted from the first word written here) as text: the word,
    /// preceded by a space unless it is the answer's very first.
    pub fn token(&self, index: u32) -> (&'static str, &'static str) {
        let at = self.first.saturating_add(index);
        let word = WORDS[(mix(self.seed ^ u64::from(at)) % WORDS.len() as u64) as usize];
        (if at == 0 { "" } else { " " }, word)
    }

    /// The `tokens` words written here, as one text.
    pub fn text(&self, tokens: u32) -> String {
        let mut out = String::with_capacity(tokens as usize * 7);
        for i in 0..tokens {
            let (space, word) = self.token(i);
            out.push_str(space);
            out.push_str(word);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_eos_gives_exactly_the_cap() {
        let mut rng = SplitMix64::new(1);
        assert_eq!(
            plan_output(&mut rng, 100.0, 37, true),
            OutputPlan {
                tokens: 37,
                finish: FinishReason::Length
            }
        );
    }

    #[test]
    fn drawn_lengths_have_the_asked_mean_and_respect_the_cap() {
        let mut rng = SplitMix64::new(2);
        let n = 50_000;
        let total: u64 = (0..n)
            .map(|_| u64::from(plan_output(&mut rng, 200.0, 1_000_000, false).tokens))
            .sum();
        let mean = total as f64 / f64::from(n);
        assert!((190.0..210.0).contains(&mean), "{mean}");
        let capped = (0..1000)
            .map(|_| plan_output(&mut rng, 200.0, 10, false))
            .collect::<Vec<_>>();
        assert!(capped.iter().all(|p| p.tokens <= 10));
        assert!(capped.iter().any(|p| p.finish == FinishReason::Length));
        assert!(capped
            .iter()
            .filter(|p| p.finish == FinishReason::Stop)
            .all(|p| p.tokens <= 10));
    }

    #[test]
    fn words_are_deterministic_and_spaced() {
        let w = Words::new(9);
        assert_eq!(w.text(5), Words::new(9).text(5));
        assert_eq!(w.text(5).split(' ').count(), 5);
        assert!(!w.text(1).starts_with(' '));
        // Continued from word 2, it says what the whole answer says after its first two.
        assert_eq!(
            format!("{}{}", w.text(2), Words::from_word(9, 2).text(3)),
            w.text(5)
        );
    }
}
