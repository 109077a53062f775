//! Local time as the C library sees it.

/// The local UTC offset in seconds at `seconds` since the epoch, as git finds it: `localtime_r`, which honours
/// `TZ` and reads `/etc/localtime` once. 0 when the C library cannot tell.
pub fn utc_offset(seconds: i64) -> i32 {
    let t = seconds as libc::time_t;
    // SAFETY: `tm` is plain data (all-zero is a valid value) that localtime_r fills; both pointers are valid
    // for the call and nothing is kept after it.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff as i32
        }
    }
}
