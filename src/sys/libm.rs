//! The C maths library's functions the binary needs, written out, so that `libm.so` is not loaded: one shared
//! library fewer to map and relocate at every start (`--version` included), and about 0.3 MB less resident.
//! Memory ranking needs `ln` (`agent::memory::rank`, with its own `exp2`), and HTML to Markdown (htmd) calls
//! `log10f` for the width of an ordered list's numbers; these were the only calls into libm (`nm -D
//! --undefined-only` of the release binary lists none now).

/// `ln x` for a positive, finite, normal `x`: with `x = m * 2^e`, `m` in [1, 2), `ln x = e ln 2 + ln m`, and
/// `ln m = 2 atanh z = 2 (z + z^3/3 + z^5/5 + ...)` for `z = (m - 1) / (m + 1)` in [0, 1/3): 14 terms reach
/// 1e-14.
pub fn ln(x: f64) -> f64 {
    debug_assert!(x.is_normal() && x > 0.0, "ln of {x}");
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mantissa = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let z = (mantissa - 1.0) / (mantissa + 1.0);
    let (mut power, mut sum) = (z, 0.0);
    for k in 0..14 {
        sum += power / f64::from(2 * k + 1);
        power *= z * z;
    }
    exponent as f64 * std::f64::consts::LN_2 + 2.0 * sum
}

/// C's `log10f`, for htmd's `f32::log10` (which compiles to a call of this name): defined in the executable,
/// the call binds here and the linker (`--as-needed`) drops `libm.so`. Computed in `f64` and rounded once, so
/// a power of ten gives its exact integer (htmd takes the ceiling). Only where libm is a library of its own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn log10f(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x.is_infinite() {
        return f32::INFINITY;
    }
    (ln(f64::from(x)) / std::f64::consts::LN_10) as f32
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn log10f_agrees_with_the_maths_library_and_is_exact_at_powers_of_ten() {
        for (n, power) in [1.0f32, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7]
            .iter()
            .enumerate()
        {
            assert_eq!(log10f(*power), n as f32, "log10f {power}");
        }
        // What htmd computes: the digits of a list's last number `n` as the ceiling of log10(n + 1).
        for n in 1u32..100_000 {
            let digits = log10f((n + 1) as f32).ceil() as usize;
            assert_eq!(digits, n.to_string().len(), "n {n}");
        }
        let mut x = f32::MIN_POSITIVE / 1024.0;
        while x.is_finite() {
            let (ours, reference) = (log10f(x), f64::from(x).log10() as f32);
            assert!(
                (ours - reference).abs() <= f32::EPSILON * reference.abs().max(1.0),
                "log10f {x}"
            );
            x = x * 1.7 + 1e-30;
        }
        assert!(log10f(-1.0).is_nan() && log10f(f32::NAN).is_nan());
        assert_eq!(log10f(0.0), f32::NEG_INFINITY);
        assert_eq!(log10f(f32::INFINITY), f32::INFINITY);
    }
}
