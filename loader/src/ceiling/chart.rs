//! `--plot FILE.svg`: latency percentiles (p50, p99, p99.9, corrected) against the offered
//! rate, per URL: the hockey stick. The latency axis is logarithmic, so the flat part and the
//! wall after the ceiling both fit; the objective is a horizontal line, each ceiling a
//! vertical one; a hollow marker is a failed step.
//!
//! Invariant: a complete, well-formed SVG whatever the input (no steps, one step, zeros).

use super::report::{objective_text, rate_text};
use super::run::{Outcome, Step};
use crate::plot::{escape, nice_step};
use std::fmt::Write as _;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 100.0;
const BOTTOM: f64 = 60.0;
const COLOURS: &[&str] = &["#1f77b4", "#d62728"];
/// (label, quantile, dash pattern).
const CURVES: &[(&str, f64, &str)] = &[
    ("p50", 0.5, "2,4"),
    ("p99", 0.99, ""),
    ("p99.9", 0.999, "8,4"),
];

fn latency_ms(s: &Step, q: f64) -> f64 {
    let h = &s.result.hist.total;
    crate::figures::hist_percentile_us(h, q * 100.0) as f64 / 1000.0
}

struct Axes {
    x_max: f64,
    /// log10 of the latency axis' ends (ms).
    y_lo: f64,
    y_hi: f64,
}

impl Axes {
    fn new(o: &Outcome) -> Axes {
        let x_max = o
            .steps
            .iter()
            .map(|s| s.figures.offered)
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.05;
        let objective = o.objective.limit_us as f64 / 1000.0;
        let mut lo = objective;
        let mut hi = objective;
        for s in &o.steps {
            for &(_, q, _) in CURVES {
                let v = latency_ms(s, q);
                if v > 0.0 {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        Axes {
            x_max,
            y_lo: lo.max(0.001).log10().floor(),
            y_hi: (hi.log10().ceil()).max(lo.max(0.001).log10().floor() + 1.0),
        }
    }

    fn x(&self, rate: f64) -> f64 {
        LEFT + rate / self.x_max * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, ms: f64) -> f64 {
        let l = ms.max(10f64.powf(self.y_lo)).log10();
        TOP + (self.y_hi - l) / (self.y_hi - self.y_lo) * (HEIGHT - TOP - BOTTOM)
    }
}

fn decade_label(k: f64) -> String {
    let v = 10f64.powf(k);
    if k >= 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.*}", (-k) as usize)
    }
}

fn grid(s: &mut String, a: &Axes) {
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
    let step = nice_step(a.x_max, 8.0);
    let mut v = 0.0;
    while v <= a.x_max + 1e-9 {
        let x = a.x(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y1 + 18.0,
            rate_text(v)
        );
        v += step;
    }
    let mut k = a.y_lo;
    while k <= a.y_hi + 1e-9 {
        let y = a.y(10f64.powf(k));
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            decade_label(k)
        );
        k += 1.0;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y1 - y0
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">offered rate (req/s)</text><text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">latency, corrected (ms, log)</text>"##,
        (x0 + x1) / 2.0,
        HEIGHT - 14.0,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
}

fn curves(s: &mut String, o: &Outcome, a: &Axes, side: usize) {
    let colour = COLOURS[side % COLOURS.len()];
    let mut steps: Vec<&Step> = o.steps_of(side).collect();
    steps.sort_by(|x, y| x.figures.offered.total_cmp(&y.figures.offered));
    for &(_, q, dash) in CURVES {
        let pts: Vec<String> = steps
            .iter()
            .map(|st| {
                format!(
                    "{:.1},{:.1}",
                    a.x(st.figures.offered),
                    a.y(latency_ms(st, q))
                )
            })
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"##,
            pts.join(" ")
        );
        for st in &steps {
            let fill = if st.verdict.passed() { colour } else { "white" };
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{fill}" stroke="{colour}"/>"##,
                a.x(st.figures.offered),
                a.y(latency_ms(st, q))
            );
        }
    }
    if let Some(c) = o.ceilings[side].rate() {
        let x = a.x(c);
        // The label goes right of the line, or left of it near the right edge.
        let (lx, anchor) = if x > WIDTH - RIGHT - 120.0 {
            (x - 4.0, "end")
        } else {
            (x + 4.0, "start")
        };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="{colour}" stroke-dasharray="6,3"/><text x="{lx:.1}" y="{}" fill="{colour}" text-anchor="{anchor}">ceiling {}</text>"##,
            HEIGHT - BOTTOM,
            TOP + 14.0 + 16.0 * side as f64,
            rate_text(c)
        );
    }
}

/// The chart as an SVG document.
pub fn render(o: &Outcome) -> String {
    let a = Axes::new(o);
    let mut s = String::with_capacity(16 * 1024);
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"##
    );
    s.push_str(r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">Ceiling at {}: latency against offered rate</text>"##,
        escape(&objective_text(o))
    );
    for (i, c) in o.ceilings.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let ceiling = c.rate().map_or("no ceiling".into(), |r| {
            format!("ceiling {} req/s", rate_text(r))
        });
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{}" width="14" height="4" fill="{colour}"/><text x="{}" y="{}">{}: {}</text>"##,
            36.0 + 18.0 * i as f64,
            LEFT + 20.0,
            42.0 + 18.0 * i as f64,
            escape(&match (o.ceilings.len(), i) {
                (1, _) => c.url.clone(),
                (_, 0) => format!("A {}", c.url),
                _ => format!("B {}", c.url),
            }),
            escape(&ceiling)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="42" text-anchor="end">dotted p50, solid p99, dashed p99.9; hollow: failed step</text>"##,
        WIDTH - RIGHT
    );
    grid(&mut s, &a);
    let obj = o.objective.limit_us as f64 / 1000.0;
    let y = a.y(obj);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#2ca02c" stroke-width="1.5" stroke-dasharray="4,4"/><text x="{}" y="{:.1}" fill="#2ca02c">objective {}</text>"##,
        WIDTH - RIGHT,
        LEFT + 6.0,
        y - 5.0,
        escape(&objective_text(o))
    );
    for side in 0..o.ceilings.len() {
        curves(&mut s, o, &a, side);
    }
    s.push_str("</svg>\n");
    s
}
