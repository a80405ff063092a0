//! `actix_matrix bench`: the multiply alone, timed inside the very binary that serves, so code
//! generation (profile, flags, allocator) is measured apart from serving.
//!
//! Why not criterion: a criterion bench is a binary of its own. Built once per build variant it
//! would compile criterion and its dependencies in each of the eight profiles (minutes each on
//! two cores), and with LTO it is a different optimisation unit than the server it stands for.
//! Timing the served binary costs no build and cannot measure other code. Like criterion, each
//! round runs the multiply as many times as fit in `--round-ms` (the count fixed by a warm-up) and
//! reports its time; rounds are the independent samples. Beside the wall time it reports the
//! thread's time on a CPU: on a machine shared with other work the wall time includes every
//! preemption, the CPU time does not.

use std::hint::black_box;
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use crate::matrix::{Matrix, multiply};

/// Flags of `actix_matrix bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Matrix sizes, comma-separated (each 1..=512).
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_size)]
    pub n: Vec<NonZeroUsize>,
    /// Rounds per size: the independent samples.
    #[arg(long, default_value = "10")]
    pub rounds: NonZeroUsize,
    /// Wall time one round aims at, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub round_ms: u64,
}

fn parse_size(text: &str) -> Result<NonZeroUsize, String> {
    text.parse::<NonZeroUsize>()
        .ok()
        .filter(|n| n.get() as u64 <= crate::MAX_N)
        .ok_or_else(|| format!("n must be between 1 and {}, not {text:?}", crate::MAX_N))
}

/// One round: `iterations` multiplies of the same two matrices took `seconds` of wall time, of
/// which `cpu_seconds` on a CPU (None where the kernel does not say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub n: usize,
    pub round: usize,
    pub iterations: u64,
    pub seconds: f64,
    pub cpu_seconds: Option<f64>,
}

impl Round {
    /// One JSON object per line: `{"n":..,"round":..,"iterations":..,"seconds":..,"cpu_seconds":..}`.
    fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let cpu = self
            .cpu_seconds
            .map_or_else(|| "null".to_owned(), |s| format!("{s:e}"));
        writeln!(
            out,
            r#"{{"n":{},"round":{},"iterations":{},"seconds":{:e},"cpu_seconds":{cpu}}}"#,
            self.n, self.round, self.iterations, self.seconds
        )
    }
}

/// This thread's time on a CPU so far (`CLOCK_THREAD_CPUTIME_ID`: exact to the nanosecond, unlike
/// `/proc/thread-self/schedstat`, which the kernel brings up to date only at a tick or a switch).
#[allow(unsafe_code, reason = "one libc call; std has no thread CPU clock")]
fn on_cpu() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the duration of the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut now) };
    let secs = u64::try_from(now.tv_sec).ok()?;
    let nanos = u32::try_from(now.tv_nsec).ok()?;
    (status == 0).then(|| Duration::new(secs, nanos))
}

/// Wall time and time on a CPU of `iterations` multiplies.
fn time_multiplies(a: &Matrix, b: &Matrix, iterations: u64) -> (Duration, Option<Duration>) {
    let (started, cpu_before) = (Instant::now(), on_cpu());
    for _ in 0..iterations {
        // black_box: the product must be computed, and its inputs not assumed constant
        let _ = black_box(multiply(black_box(a), black_box(b)));
    }
    let wall = started.elapsed();
    let cpu = on_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    (wall, cpu)
}

/// How many multiplies fill `round`: doubled until a tenth of it is reached (cold caches and
/// first-touch page faults fall in that warm-up), by CPU time where known, so a preemption
/// during the warm-up does not shrink the rounds.
fn calibrate(a: &Matrix, b: &Matrix, round: Duration) -> u64 {
    let mut iterations = 1_u64;
    loop {
        let (wall, cpu) = time_multiplies(a, b, iterations);
        let took = cpu.unwrap_or(wall);
        if took >= round / 10 || iterations >= 1 << 30 {
            let per_call = took.as_secs_f64() / iterations as f64;
            // a float-to-int `as` saturates; at least one multiply per round
            return ((round.as_secs_f64() / per_call.max(1e-9)) as u64).max(1);
        }
        iterations *= 2;
    }
}

/// Times every size's rounds, writing each as a JSON line once measured.
///
/// # Errors
/// When `out` cannot be written.
pub fn run(args: &BenchArgs, out: &mut impl Write) -> io::Result<()> {
    let round = Duration::from_millis(args.round_ms);
    for &n in &args.n {
        let mut rng = fastrand::Rng::with_seed(n.get() as u64);
        let (a, b) = (Matrix::random(n, &mut rng), Matrix::random(n, &mut rng));
        let iterations = calibrate(&a, &b, round);
        for index in 0..args.rounds.get() {
            let (wall, cpu) = time_multiplies(&a, &b, iterations);
            Round {
                n: n.get(),
                round: index,
                iterations,
                seconds: wall.as_secs_f64(),
                cpu_seconds: cpu.map(|c| c.as_secs_f64()),
            }
            .write_json(out)?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed unwrap is a failed test"
    )]
    use super::*;

    #[test]
    fn writes_one_line_per_round_and_size() {
        let args = BenchArgs {
            n: vec![NonZeroUsize::new(3).unwrap(), NonZeroUsize::new(5).unwrap()],
            rounds: NonZeroUsize::new(2).unwrap(),
            round_ms: 1,
        };
        let mut out = Vec::new();
        run(&args, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with(r#"{"n":3,"round":0,"iterations":"#));
        assert!(lines[3].starts_with(r#"{"n":5,"round":1,"iterations":"#));
        for line in lines {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(value["iterations"].as_u64().unwrap() >= 1);
            assert!(value["seconds"].as_f64().unwrap() > 0.0);
            let cpu = value["cpu_seconds"].as_f64().unwrap();
            assert!(cpu > 0.0 && cpu <= value["seconds"].as_f64().unwrap() * 1.01);
        }
    }

    #[test]
    fn refuses_sizes_out_of_range() {
        assert!(parse_size("0").is_err());
        assert!(parse_size("513").is_err());
        assert_eq!(parse_size("512").unwrap().get(), 512);
    }
}
