//! Repetitions, medians, spreads and ratios, and the Markdown tables every workload prints.

use std::fmt::Write as _;

/// The text a row shows for a system this build cannot measure.
pub(crate) const NOT_MEASURED: &str = "n/a";

/// The median of `v` (for an even count, the mean of the two middle values: the upper one
/// alone would be the better of two repetitions for a rate and the worse for a cost, so
/// `--reps 2` would read as the best or worst run); NaN for an empty `v`.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Half the range of `v`, in percent of its median: how far apart the repetitions were.
pub(crate) fn spread_pct(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    (hi - lo) / 2.0 / median(v) * 100.0
}

/// One system's repetitions of `K` figures: `runs[r][k]` is figure `k` of repetition `r`.
#[derive(Debug, Clone)]
pub(crate) struct Reps<const K: usize> {
    runs: Vec<[f64; K]>,
}

impl<const K: usize> Reps<K> {
    /// The median of figure `k` over the repetitions.
    pub(crate) fn median(&self, k: usize) -> f64 {
        median(&self.column(k))
    }

    /// The largest value of figure `k` over the repetitions (for counts that must stay 0).
    pub(crate) fn max(&self, k: usize) -> f64 {
        self.column(k).into_iter().fold(f64::NAN, f64::max)
    }

    /// The median of every figure, each taken on its own, except the figures `worst`, which
    /// are the largest over the repetitions (early wakes, which must all be 0, and the like).
    pub(crate) fn medians_but_max(&self, worst: &[usize]) -> [f64; K] {
        let mut m = self.medians();
        for &k in worst {
            m[k] = self.max(k);
        }
        m
    }

    /// Whether `check` holds for some repetition's figures taken together (a warning that
    /// compares two figures of one run must not compare medians of different runs).
    pub(crate) fn any_run(&self, check: impl Fn(&[f64; K]) -> bool) -> bool {
        self.runs.iter().any(check)
    }

    /// The median of every figure, each taken on its own.
    pub(crate) fn medians(&self) -> [f64; K] {
        std::array::from_fn(|k| self.median(k))
    }

    /// Figure `k` as "median ±spread%", the median written by `fmt`.
    pub(crate) fn shown(&self, k: usize, fmt: impl Fn(f64) -> String) -> String {
        let column = self.column(k);
        format!("{} ±{:.0}%", fmt(median(&column)), spread_pct(&column))
    }

    fn column(&self, k: usize) -> Vec<f64> {
        self.runs.iter().map(|r| r[k]).collect()
    }
}

/// Measures every system `reps` times, interleaving them (a b c, b c a, c a b, ...) so that a
/// slow phase of the machine hits every system alike, and no system is always the first of a
/// round (after a workload's setup, or straight after another system's teardown); returns each
/// system's repetitions. `measure` returns `None` for a system this build cannot measure (then
/// so does this).
pub(crate) fn interleaved<S, const K: usize>(
    reps: usize,
    systems: &[S],
    mut measure: impl FnMut(&S) -> Option<[f64; K]>,
) -> Vec<Option<Reps<K>>> {
    let mut all: Vec<Option<Reps<K>>> = systems
        .iter()
        .map(|_| Some(Reps { runs: Vec::new() }))
        .collect();
    let n = systems.len();
    for rep in 0..reps {
        for s in (0..n).map(|i| (i + rep) % n) {
            let sys = &systems[s];
            if let Some(reps) = &mut all[s] {
                match measure(sys) {
                    Some(figures) => reps.runs.push(figures),
                    None => all[s] = None,
                }
            }
        }
    }
    all
}

/// A rate: "2.50 M", "31.2 k", "900".
pub(crate) fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// "N x better" / "N x worse", from our side; `higher_is_better` tells which way to divide.
pub(crate) fn ratio(ours: f64, peer: f64, higher_is_better: bool) -> String {
    let r = if higher_is_better {
        ours / peer
    } else {
        peer / ours
    };
    if ours == peer {
        "same".to_string()
    } else if !r.is_finite() || r <= 0.0 {
        "n/a".to_string()
    } else if r >= 1.0 {
        format!("{r:.2}x better")
    } else {
        format!("{:.2}x worse", 1.0 / r)
    }
}

/// [`ratio`], unless both figures are below `noise` (a figure too small for its ratio to mean
/// anything, as fractions of a millisecond of CPU over an idle spell): then "level", with the
/// bound, written by `fmt`.
pub(crate) fn ratio_above_noise(
    ours: f64,
    peer: f64,
    higher_is_better: bool,
    noise: f64,
    fmt: impl Fn(f64) -> String,
) -> String {
    if ours < noise && peer < noise {
        format!("level (both under {}, inside the noise)", fmt(noise))
    } else {
        ratio(ours, peer, higher_is_better)
    }
}

/// [`ratio`] of each pair, joined with " / ".
pub(crate) fn ratios(ours: &[f64], peer: &[f64], higher_is_better: bool) -> String {
    ours.iter()
        .zip(peer)
        .map(|(&o, &p)| ratio(o, p, higher_is_better))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Each figure written by `fmt`, joined with " / ".
pub(crate) fn joined(figures: &[f64], fmt: impl Fn(f64) -> String) -> String {
    figures
        .iter()
        .map(|&x| fmt(x))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The last cell of a summary row for an issue's target: "target met (GOAL)" or "target missed
/// (GOAL)", `goal` saying what was asked ("<= 2", ">= 2x").
pub(crate) fn target(met: bool, goal: &str) -> String {
    format!("target {} ({goal})", if met { "met" } else { "missed" })
}

/// A table row for a system this build cannot measure: its name, "n/a", dashes, and `why` in
/// the last of its `columns` cells (the last, so that the long text widens no other column).
pub(crate) fn unmeasured_row(name: &str, columns: usize, why: &str) -> Vec<String> {
    let mut row = vec![name.to_string(), NOT_MEASURED.to_string()];
    row.resize(columns.max(3) - 1, "-".to_string());
    row.push(why.to_string());
    row
}

/// A Markdown table, its columns padded to their widest cell.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let row = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
    let mut out = row(&mut headers.iter().copied());
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in rows {
        out += &row(&mut r.iter().map(String::as_str));
    }
    out
}

/// Prints [`table`] and a blank line.
pub(crate) fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    println!("{}", table(headers, rows));
}

/// The rows of the final summary: workload, metric, ours, peer, peer's figure, ours vs peer.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    workload: &'static str,
    rows: Vec<Vec<String>>,
}

impl Summary {
    /// The summary's column headers.
    pub(crate) const HEADERS: [&'static str; 6] = [
        "workload",
        "metric",
        "ours",
        "peer",
        "peer's",
        "ours vs peer",
    ];

    /// Starts the rows of a workload.
    pub(crate) fn workload(&mut self, name: &'static str) {
        self.workload = name;
    }

    /// A row comparing one figure; `fmt` writes both figures.
    pub(crate) fn add(
        &mut self,
        metric: &str,
        peer: &str,
        [ours, theirs]: [f64; 2],
        higher_is_better: bool,
        fmt: impl Fn(f64) -> String,
    ) {
        self.add_text(
            metric,
            &fmt(ours),
            peer,
            &fmt(theirs),
            &ratio(ours, theirs, higher_is_better),
        );
    }

    /// A row comparing several figures at once ("p50 / p99 / max").
    pub(crate) fn add_all(
        &mut self,
        metric: &str,
        peer: &str,
        ours: &[f64],
        theirs: &[f64],
        higher_is_better: bool,
        fmt: impl Fn(f64) -> String + Copy,
    ) {
        self.add_text(
            metric,
            &joined(ours, fmt),
            peer,
            &joined(theirs, fmt),
            &ratios(ours, theirs, higher_is_better),
        );
    }

    /// A row of ready-made cells, for figures that are not a plain comparison.
    pub(crate) fn add_text(
        &mut self,
        metric: &str,
        ours: &str,
        peer: &str,
        theirs: &str,
        vs: &str,
    ) {
        self.rows.push(vec![
            self.workload.to_string(),
            metric.to_string(),
            ours.to_string(),
            peer.to_string(),
            theirs.to_string(),
            vs.to_string(),
        ]);
    }

    /// A row for a peer this build cannot measure, saying why.
    pub(crate) fn add_unmeasured(&mut self, metric: &str, peer: &str, why: &str) {
        self.add_text(metric, "", peer, NOT_MEASURED, why);
    }

    /// The rows so far.
    pub(crate) fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_rotates_the_first_system_and_keeps_each_ones_runs() {
        let mut order = Vec::new();
        let all = interleaved(4, &[0usize, 1, 2], |&s| {
            order.push(s);
            (s != 2 || order.len() < 6).then_some([s as f64])
        });
        assert_eq!(order, [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1]);
        assert_eq!(all[0].as_ref().unwrap().runs, [[0.0]; 4]);
        assert_eq!(all[1].as_ref().unwrap().runs, [[1.0]; 4]);
        assert!(all[2].is_none(), "a system it cannot measure is dropped");
    }

    #[test]
    fn ratios_read_from_our_side() {
        assert_eq!(ratio(3.0, 1.5, true), "2.00x better");
        assert_eq!(ratio(1.5, 3.0, true), "2.00x worse");
        assert_eq!(ratio(1.0, 4.0, false), "4.00x better", "lower is better");
        assert_eq!(ratio(2.0, 2.0, false), "same");
        assert_eq!(ratio(0.0, 1.0, false), "n/a");
        assert_eq!(
            ratios(&[2.0, 1.0], &[1.0, 2.0], true),
            "2.00x better / 2.00x worse"
        );
    }

    #[test]
    fn figures_below_the_noise_are_level_whatever_their_ratio() {
        let ms = |x: f64| format!("{x:.1} ms");
        assert_eq!(
            ratio_above_noise(0.9, 0.3, false, 2.0, ms),
            "level (both under 2.0 ms, inside the noise)"
        );
        assert_eq!(ratio_above_noise(3.0, 1.5, false, 2.0, ms), "2.00x worse");
        assert_eq!(ratio_above_noise(1.0, 4.0, false, 2.0, ms), "4.00x better");
    }

    #[test]
    fn targets_say_whether_they_were_met() {
        assert_eq!(target(true, "<= 2"), "target met (<= 2)");
        assert_eq!(target(false, ">= 2x"), "target missed (>= 2x)");
    }

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(median(&[]).is_nan());
        // An even count: the middle of the two middle values, whichever way is better.
        assert_eq!(median(&[10.0, 20.0]), 15.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(spread_pct(&[10.0, 20.0]), 5.0 / 15.0 * 100.0);
        assert_eq!(spread_pct(&[90.0, 100.0, 110.0]), 10.0);
        let mut calls = 0.0;
        let reps = interleaved(3, &["a", "b"], |&s| {
            calls += 1.0;
            (s == "a").then_some([calls, 1.0])
        });
        let a = reps[0].as_ref().expect("a is measured");
        // b is asked once: a system this build cannot measure is not asked again.
        assert_eq!(calls, 4.0);
        assert_eq!(a.medians(), [3.0, 1.0], "a ran at calls 1, 3, 4");
        assert_eq!(a.max(0), 4.0);
        assert_eq!(a.medians_but_max(&[0]), [4.0, 1.0]);
        assert!(reps[1].is_none(), "b is not measurable in this build");
        assert_eq!(a.shown(1, |x| format!("{x:.1}")), "1.0 ±0%");
        // One run in three late (figure 0 past figure 1): the medians hide it, a run does not.
        let mut late = [[1.0, 5.0], [9.0, 5.0], [2.0, 5.0]].into_iter();
        let r = interleaved(3, &["x"], |_| late.next()).remove(0).unwrap();
        assert!(r.median(0) <= r.median(1));
        assert!(r.any_run(|f| f[0] > f[1]));
        assert!(!r.any_run(|f| f[0] > 10.0));
    }

    #[test]
    fn tables_pad_their_columns() {
        let t = table(
            &["a", "long header"],
            &[vec!["wide cell".into(), "x".into()]],
        );
        assert_eq!(
            t,
            "| a         | long header |\n\
             |-----------|-------------|\n\
             | wide cell | x           |\n"
        );
    }

    #[test]
    fn rates_have_units() {
        assert_eq!(rate(2_500_000.0), "2.50 M");
        assert_eq!(rate(31_240.0), "31.2 k");
        assert_eq!(rate(900.0), "900");
    }
}
