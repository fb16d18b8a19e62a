//! The request list of Systalyze's vLLM benchmarks on AWS (github.com/systalyze/vllm-benchmarks,
//! `workload/aws-p50p90-v1/requests-qwen3-32b.jsonl`, commit 004db0c3): 160 chat requests of
//! coding prompts, as `(input, output)` tokens in the file's order. The file holds the prompts'
//! text; the lengths here are the targets its generator (`workload/build_workload.py`) documents
//! and re-derived from that description: each length a draw of a lognormal at the quantiles
//! `(i + 0.5) / 160`, bounded at 11,200 tokens in and 800 out, with the two order statistics
//! that read as p50 and p90 pinned to 3,500 / 10,000 tokens in and 200 / 400 out; outputs
//! shuffled against inputs, then the pairs shuffled (Python's `random.Random(43)` and
//! `random.Random(42)`). The input counts the chat template, as the server counts it; every
//! output is generated in full (`ignore_eos`). The test below holds the list to that
//! description.

/// The 160 requests, in the file's order.
#[rustfmt::skip]
pub const AWS_P50P90_V1: &[(u32, u32)] = &[
    (2751, 46), (3956, 140), (4832, 93), (2096, 243), (10000, 147), (3756, 150), (7758, 128),
    (1057, 67), (8272, 141), (2939, 267), (1708, 281), (9094, 126), (11200, 71), (1313, 296),
    (4336, 180), (6131, 254), (373, 338), (1278, 144), (2431, 153), (6336, 290), (1966, 562),
    (3178, 219), (7452, 321), (4223, 217), (600, 317), (1347, 172), (3346, 162), (6444, 113),
    (2978, 364), (11200, 284), (11200, 226), (9585, 97), (5339, 259), (671, 197), (4637, 400),
    (2500, 441), (1773, 118), (3303, 75), (1171, 99), (6911, 101), (2465, 56), (2128, 123),
    (2825, 479), (4394, 234), (2328, 175), (2901, 160), (4113, 287), (8660, 138), (2863, 224),
    (1243, 353), (3661, 196), (3057, 91), (7309, 183), (1547, 382), (3433, 174), (4900, 293),
    (1134, 595), (6033, 110), (10000, 239), (9332, 120), (1901, 117), (2714, 215), (4060, 495),
    (1612, 245), (4701, 166), (3261, 169), (2396, 168), (8092, 465), (733, 177), (4279, 210),
    (11200, 431), (2063, 358), (11200, 86), (7602, 237), (4575, 204), (5845, 132), (10464, 264),
    (3905, 343), (1740, 108), (5668, 800), (1415, 232), (6232, 303), (975, 105), (3614, 275),
    (1837, 641), (7038, 370), (6555, 81), (2261, 252), (1381, 156), (5186, 306), (3568, 184),
    (5755, 270), (11200, 115), (5499, 200), (6669, 191), (4513, 222), (5418, 95), (5261, 247),
    (4453, 143), (1676, 325), (3708, 299), (5938, 135), (11200, 262), (4007, 88), (1514, 412),
    (3219, 159), (2228, 421), (3500, 137), (3500, 389), (4969, 211), (1933, 272), (11200, 134),
    (1017, 171), (6788, 78), (1207, 129), (3017, 106), (2642, 154), (4168, 163), (788, 125),
    (4766, 514), (1805, 151), (3389, 348), (2161, 145), (7921, 310), (2194, 203), (1096, 200),
    (2295, 186), (11181, 228), (11200, 278), (3805, 131), (10806, 376), (1998, 62), (8461, 535),
    (3854, 193), (11200, 329), (2030, 213), (510, 208), (3137, 400), (5582, 178), (2570, 250),
    (5040, 257), (11200, 313), (2362, 334), (11200, 189), (7171, 148), (2678, 165), (2535, 83),
    (1481, 112), (887, 188), (932, 194), (5112, 206), (1448, 121), (8871, 230), (1579, 103),
    (1869, 452), (2606, 157), (2788, 241), (3097, 221), (839, 181), (1644, 713),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a linear-interpolated percentile reads at `p` of the sorted `values`, as the
    /// generator reads it.
    fn percentile(values: &[u32], p: f64) -> f64 {
        let mut v = values.to_vec();
        v.sort_unstable();
        let position = p * (v.len() - 1) as f64;
        let (lo, hi) = (position.floor() as usize, position.ceil() as usize);
        f64::from(v[lo]) + (f64::from(v[hi]) - f64::from(v[lo])) * (position - lo as f64)
    }

    #[test]
    fn the_list_has_the_percentiles_and_bounds_its_source_declares() {
        assert_eq!(AWS_P50P90_V1.len(), 160);
        let inputs: Vec<u32> = AWS_P50P90_V1.iter().map(|&(i, _)| i).collect();
        let outputs: Vec<u32> = AWS_P50P90_V1.iter().map(|&(_, o)| o).collect();
        assert_eq!(percentile(&inputs, 0.5), 3_500.0);
        assert_eq!(percentile(&inputs, 0.9), 10_000.0);
        assert_eq!(percentile(&outputs, 0.5), 200.0);
        assert_eq!(percentile(&outputs, 0.9), 400.0);
        assert_eq!(inputs.iter().max(), Some(&11_200));
        assert_eq!(outputs.iter().max(), Some(&800));
        assert!(AWS_P50P90_V1
            .iter()
            .all(|&(i, o)| i >= 1 && o >= 1 && i + o <= 12_000));
        // A lognormal's mean sits above its median: 4,426 in and 231 out on average.
        let mean = |v: &[u32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        assert!((mean(&inputs) - 4_425.8).abs() < 0.1);
        assert!((mean(&outputs) - 230.7).abs() < 0.1);
    }
}
