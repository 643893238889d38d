//! The `grpc-timeout` header: `1*8DIGIT unit`, the unit one of `H M S m u n`.

use std::time::Duration;

use http::HeaderValue;

/// The most digits `grpc-timeout` may have.
const MAX_DIGITS: usize = 8;

/// Parses a `grpc-timeout` value: 1 to 8 ASCII digits, then a unit: `H` (hours), `M` (minutes),
/// `S` (seconds), `m` (milliseconds), `u` (microseconds) or `n` (nanoseconds). Anything else
/// (no digit, a ninth digit, a sign, a space, another unit, non-ASCII) is malformed: `None`,
/// never a panic. The gRPC over HTTP/2 spec defines only the well-formed value, not what a
/// server does with another: the layers ignore a malformed header (as tonic's server does;
/// grpc-go's server rejects the call with INTERNAL). tonic also accepts a leading `+`
/// (`+1S`), which the spec's grammar does not; this parser rejects it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::grpc::parse_grpc_timeout;
///
/// assert_eq!(parse_grpc_timeout(b"100m"), Some(Duration::from_millis(100)));
/// assert_eq!(parse_grpc_timeout(b"99999999H"), Some(Duration::from_secs(99_999_999 * 3600)));
/// assert_eq!(parse_grpc_timeout(b"123456789S"), None); // nine digits
/// assert_eq!(parse_grpc_timeout(b"1s"), None); // seconds are `S`
/// ```
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Formats `timeout` as a `grpc-timeout` value: the finest unit that holds it in 8 digits,
/// rounded up (a deadline is never made shorter); past `99999999H`, that.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::grpc::format_grpc_timeout;
///
/// assert_eq!(format_grpc_timeout(Duration::from_millis(250)), "250000u");
/// assert_eq!(format_grpc_timeout(Duration::from_secs(3600)), "3600000m");
/// assert_eq!(format_grpc_timeout(Duration::ZERO), "0n");
/// ```
pub fn format_grpc_timeout(timeout: Duration) -> HeaderValue {
    format(timeout, u128::div_ceil)
}

/// Formats what is left of a deadline being passed on: as [`format_grpc_timeout`], but rounded
/// down, so that the callee's deadline is never later than the caller's.
pub(crate) fn format_grpc_timeout_left(left: Duration) -> HeaderValue {
    format(left, |nanos, per| nanos / per)
}

/// The finest unit that holds `timeout`, divided by `round`, in 8 digits; past `99999999H`,
/// that.
fn format(timeout: Duration, round: fn(u128, u128) -> u128) -> HeaderValue {
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let nanos = timeout.as_nanos();
    let (n, unit) = UNITS
        .iter()
        .map(|&(per, unit)| (round(nanos, per), unit))
        .find(|&(n, _)| n <= 99_999_999)
        .unwrap_or((99_999_999, 'H'));
    HeaderValue::from_str(&format!("{n}{unit}")).expect("digits and a letter")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit() {
        let cases: [(&[u8], Duration); 6] = [
            (b"2H", Duration::from_secs(7200)),
            (b"3M", Duration::from_secs(180)),
            (b"4S", Duration::from_secs(4)),
            (b"5m", Duration::from_millis(5)),
            (b"6u", Duration::from_micros(6)),
            (b"7n", Duration::from_nanos(7)),
        ];
        for (text, d) in cases {
            assert_eq!(parse_grpc_timeout(text), Some(d), "{text:?}");
        }
    }

    #[test]
    fn spec_edge_cases() {
        // Zero, leading zeros, and the 8-digit maximum in every unit.
        assert_eq!(parse_grpc_timeout(b"0n"), Some(Duration::ZERO));
        assert_eq!(
            parse_grpc_timeout(b"00000001S"),
            Some(Duration::from_secs(1))
        );
        for unit in *b"HMSmun" {
            let mut v = b"99999999".to_vec();
            v.push(unit);
            assert!(parse_grpc_timeout(&v).is_some(), "{unit}");
            v.insert(0, b'1');
            assert_eq!(parse_grpc_timeout(&v), None, "nine digits, {unit}");
        }
        // Malformed: ignored, never a panic.
        for bad in [
            &b""[..],
            b"S",
            b"1",
            b"10",
            b"1x",
            b"1 S",
            b" 1S",
            b"1S ",
            b"+1S",
            b"-1S",
            b"1.5S",
            b"1h",
            b"1s",
            b"1U",
            b"1N",
            b"\xff1S",
            b"1\xff",
            "١S".as_bytes(), // a non-ASCII digit
        ] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn format_round_trips_and_rounds_up() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(99_999_999),
            Duration::from_nanos(100_000_001),
            Duration::from_millis(1500),
            Duration::from_secs(86_400 * 365),
            Duration::from_secs(99_999_999 * 3600),
        ] {
            let text = format_grpc_timeout(d);
            let back = parse_grpc_timeout(text.as_bytes()).unwrap();
            assert!(back >= d, "{d:?} -> {text:?} -> {back:?}");
            assert!(
                back - d < d / 1_000_000 + Duration::from_millis(1),
                "{d:?} -> {back:?}"
            );
        }
        assert_eq!(
            format_grpc_timeout(Duration::from_nanos(100_000_001)),
            "100001u"
        );
        assert_eq!(format_grpc_timeout(Duration::MAX), "99999999H");
    }
}
