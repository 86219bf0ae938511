//! `--plot FILE.svg`: latency by percentile, drawn as hand-written SVG (no plotting crate).
//!
//! The percentile axis uses the scale of HdrHistogram's plotter: x = 1/(1-p) on a log axis, so
//! 90%, 99%, 99.9%… are evenly spaced and the tail, where proxies differ, gets as much room as
//! the median. Latency (ms) is linear from zero. Several series (for `compare`: A's merged
//! rounds and B's merged rounds) share one chart, each in its own colour with a legend entry.
//!
//! Invariant: the output is a complete, well-formed SVG document whatever the input (empty
//! histograms, one sample, a single huge outlier); labels are XML-escaped.

use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// One curve: a label and a histogram of latencies in microseconds.
pub struct Series<'a> {
    pub label: String,
    pub hist: &'a Histogram<u64>,
}

const WIDTH: f64 = 960.0;
/// Height of the plot area; the header above it grows with the legend.
const PLOT_HEIGHT: f64 = 430.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 45.0;
/// Title and the first legend line.
const HEADER: f64 = 48.0;
const LEGEND_LINE: f64 = 20.0;
const BOTTOM: f64 = 70.0;
/// Points sampled along the x axis per curve: enough for a smooth step curve, small files.
const SAMPLES: usize = 600;
const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
];

/// Decades of the percentile axis: enough to reach the percentile of one request in the
/// largest series (1 in 200 → 99.9%, 1 in 100 000 → 99.999%), at least 99.9%, at most 99.9999%.
pub fn decades(series: &[Series]) -> u32 {
    let n = series
        .iter()
        .map(|s| s.hist.len())
        .max()
        .unwrap_or(0)
        .max(1);
    ((n as f64).log10().ceil() as u32).clamp(3, 6)
}

/// The percentile label of decade `k`: 0%, 90%, 99%, 99.9%…
pub fn decade_label(k: u32) -> String {
    if k == 0 {
        return "0%".into();
    }
    let p = 100.0 - 100.0 / 10f64.powi(k as i32);
    format!("{:.*}%", k.saturating_sub(2) as usize, p)
}

/// A "nice" tick step (1, 2 or 5 × 10^k) that splits `range` into about `target` parts.
pub fn nice_step(range: f64, target: f64) -> f64 {
    if !range.is_finite() || range <= 0.0 {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn fmt_ms(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// The latency (ms) at percentile x = 1/(1-q), log10(x) = `lx`.
fn ms_at(hist: &Histogram<u64>, lx: f64) -> f64 {
    let q = (1.0 - 10f64.powf(-lx)).clamp(0.0, 1.0);
    hist.value_at_quantile(q) as f64 / 1000.0
}

/// Where things go on the chart: sizes, the axes' ranges, and the mapping from data to
/// coordinates.
struct Frame {
    /// Decades of the percentile axis.
    decades: u32,
    /// Plot area width and height, and its top edge (below the title and the legend).
    pw: f64,
    ph: f64,
    top: f64,
    /// The whole picture's height.
    height: f64,
    /// Latency axis: its top value, tick step and the decimals its labels need.
    y_top: f64,
    step: f64,
    y_decimals: usize,
}

impl Frame {
    fn new(series: &[Series]) -> Frame {
        // The legend sits between the title and the plot, one line per series, so it never
        // hides a curve.
        let top = HEADER + LEGEND_LINE * series.len() as f64 + 12.0;
        let max_ms = series
            .iter()
            .filter(|s| !s.hist.is_empty())
            .map(|s| s.hist.max() as f64 / 1000.0)
            .fold(0.0, f64::max);
        let step = nice_step(if max_ms > 0.0 { max_ms } else { 1.0 }, 6.0);
        Frame {
            decades: decades(series),
            pw: WIDTH - LEFT - RIGHT,
            ph: PLOT_HEIGHT,
            top,
            height: top + PLOT_HEIGHT + BOTTOM,
            y_top: ((max_ms / step).ceil().max(1.0)) * step,
            step,
            y_decimals: if step >= 1.0 {
                0
            } else {
                (-step.log10()).ceil() as usize
            },
        }
    }

    /// x of log10(1/(1-p)) = `lx`.
    fn x_of(&self, lx: f64) -> f64 {
        LEFT + lx / self.decades as f64 * self.pw
    }

    fn y_of(&self, ms: f64) -> f64 {
        self.top + self.ph - ms / self.y_top * self.ph
    }
}

/// Render the chart. `title` goes on top; series are drawn in order, colours cycling.
pub fn render(title: &str, series: &[Series]) -> String {
    let f = Frame::new(series);
    let height = f.height;
    let mut s = String::with_capacity(16 * 1024 + series.len() * SAMPLES * 20);
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="13">
<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>
<text x="{}" y="30" text-anchor="middle" font-size="18" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    grid(&mut s, &f);
    axes(&mut s, &f);
    for (i, ser) in series.iter().enumerate() {
        if !ser.hist.is_empty() {
            curve(&mut s, &f, ser, COLOURS[i % COLOURS.len()]);
        }
    }
    legend(&mut s, series);
    if series.iter().all(|s| s.hist.is_empty()) {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#808080">no completed requests</text>"##,
            LEFT + f.pw / 2.0,
            f.top + f.ph / 2.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Grid: minor lines at 2..9 within each decade of 1/(1-p), major lines at the decades, and
/// the latency ticks.
fn grid(s: &mut String, f: &Frame) {
    let (top, ph, pw) = (f.top, f.ph, f.pw);
    s.push_str(r##"<g class="grid" stroke-width="1">"##);
    s.push('\n');
    for k in 0..f.decades {
        for m in 2..10 {
            let x = f.x_of(k as f64 + (m as f64).log10());
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/>"##,
                top + ph
            );
        }
    }
    for k in 0..=f.decades {
        let x = f.x_of(k as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#c8c8c8"/>
<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + ph,
            top + ph + 20.0,
            decade_label(k)
        );
    }
    let ticks = (f.y_top / f.step).round() as u64;
    for i in 0..=ticks {
        let v = i as f64 * f.step;
        let y = f.y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/>
<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 8.0,
            y + 4.0,
            fmt_ms(v, f.y_decimals)
        );
    }
    s.push_str("</g>\n");
}

/// The plot area's frame and the axes' names.
fn axes(s: &mut String, f: &Frame) {
    let (top, ph, pw) = (f.top, f.ph, f.pw);
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#404040"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">Percentile</text>
<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">Latency (ms)</text>"##,
        LEFT + pw / 2.0,
        f.height - 20.0,
        top + ph / 2.0,
        top + ph / 2.0
    );
}

/// One series' curve, sampled along the percentile axis.
fn curve(s: &mut String, f: &Frame, ser: &Series, colour: &str) {
    let _ = write!(
        s,
        r#"<polyline class="series" data-label="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-linejoin="round" points=""#,
        escape(&ser.label)
    );
    let d = f.decades;
    for j in 0..=SAMPLES {
        let lx = d as f64 * j as f64 / SAMPLES as f64;
        // The right edge is the longest request, whatever percentile the axis stops at.
        let ms = if j == SAMPLES {
            ser.hist.max() as f64 / 1000.0
        } else {
            ms_at(ser.hist, lx)
        };
        let _ = write!(s, "{:.1},{:.1} ", f.x_of(lx), f.y_of(ms));
    }
    s.push_str("\"/>\n");
}

/// Legend, under the title: a line per series with its colour and headline figures.
fn legend(s: &mut String, series: &[Series]) {
    let lx = LEFT;
    let mut ly = HEADER + LEGEND_LINE - 4.0;
    for (i, ser) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let entry = if ser.hist.is_empty() {
            format!("{} (no data)", ser.label)
        } else {
            let h = ser.hist;
            format!(
                "{}   (p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, {} requests)",
                ser.label,
                crate::figures::hist_percentile_us(h, 50.0) as f64 / 1000.0,
                crate::figures::hist_percentile_us(h, 99.0) as f64 / 1000.0,
                h.max() as f64 / 1000.0,
                h.len()
            )
        };
        let _ = writeln!(
            s,
            r#"<line class="legend" x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="3"/>
<text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 4.0,
            lx + 24.0,
            ly - 4.0,
            lx + 32.0,
            ly,
            escape(&entry)
        );
        ly += LEGEND_LINE;
    }
}

/// Render and write to `path`.
pub fn write(path: &std::path::Path, title: &str, series: &[Series]) -> std::io::Result<()> {
    std::fs::write(path, render(title, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn labels_and_steps() {
        assert_eq!(decade_label(0), "0%");
        assert_eq!(decade_label(1), "90%");
        assert_eq!(decade_label(2), "99%");
        assert_eq!(decade_label(3), "99.9%");
        assert_eq!(decade_label(5), "99.999%");
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.7, 6.0), 0.2);
        assert_eq!(nice_step(0.0, 6.0), 1.0);
    }

    #[test]
    fn two_series_are_drawn_and_escaped() {
        let a = hist((1..=1000).map(|i| i * 10));
        let b = hist((1..=1000).map(|i| i * 20));
        let svg = render(
            "A <vs> B",
            &[
                Series {
                    label: "A & co".into(),
                    hist: &a,
                },
                Series {
                    label: "B".into(),
                    hist: &b,
                },
            ],
        );
        assert!(svg.starts_with("<?xml"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("A &lt;vs&gt; B"));
        assert!(svg.contains("data-label=\"A &amp; co\""));
        assert!(svg.contains(">99.9%<"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_histogram_still_makes_a_document() {
        let e = hist([]);
        let svg = render(
            "empty",
            &[Series {
                label: "A".into(),
                hist: &e,
            }],
        );
        assert!(svg.contains("no completed requests"));
        assert!(!svg.contains("<polyline"));
        assert!(!svg.contains("NaN"));
    }
}
