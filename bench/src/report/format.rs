//! How the tables and targets print numbers.

pub fn fmt(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        digits(x, 1000.0)
    }
}

pub fn fmt_ratio(x: f64) -> String {
    if x.is_nan() || x.is_infinite() {
        "-".into()
    } else {
        digits(x, 100.0)
    }
}

/// No decimals from `whole` up, one from 10, else three.
fn digits(x: f64, whole: f64) -> String {
    if x.abs() >= whole {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}
