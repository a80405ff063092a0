//! A test-only knob for calibrating polyperf's A/B gate: `POLYPERF_TEST_SLOWDOWN_PCT=P`, read once when
//! the module loads, makes `parse_json_file` spin for P% of its own time (the whole call: open, read, parse,
//! free) after it, so a known slowdown can be injected into one revision's worker. Unset (the normal case) it costs one load of a
//! static per call and changes nothing.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::errors::ExtError;

pub(crate) const VARIABLE: &str = "POLYPERF_TEST_SLOWDOWN_PCT";
static FRACTION: OnceLock<f64> = OnceLock::new();

/// Reads the variable once; an unparsable or out-of-range value is refused (a calibration run must not
/// silently measure nothing).
pub(crate) fn init() -> Result<(), ExtError> {
    let fraction = match std::env::var(VARIABLE) {
        Err(_) => 0.0,
        Ok(text) if text.trim().is_empty() => 0.0,
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(pct) if pct.is_finite() && (0.0..=1000.0).contains(&pct) => pct / 100.0,
            _ => {
                return Err(ExtError::InvalidArgument(format!(
                    "{VARIABLE}={text:?}: expected a percentage between 0 and 1000"
                )))
            }
        },
    };
    // a second import in one process keeps the first value: "once at startup"
    let _ = FRACTION.set(fraction);
    Ok(())
}

/// Busy work for the configured share of `elapsed`, returned as the time it added.
pub(crate) fn pad(elapsed: Duration) -> Duration {
    let fraction = FRACTION.get().copied().unwrap_or(0.0);
    if fraction <= 0.0 {
        return Duration::ZERO;
    }
    let extra = elapsed.mul_f64(fraction);
    let start = Instant::now();
    let mut spin: u64 = 0;
    // spinning on the clock, not sleeping: the added time is CPU work, as a slower code path would be
    while start.elapsed() < extra {
        spin = std::hint::black_box(spin.wrapping_add(1));
    }
    start.elapsed()
}
