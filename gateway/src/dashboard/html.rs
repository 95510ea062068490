//! HTML building blocks: escaping, the page shell, status badges and times.
//! Every value that did not come from this crate's own literals goes through
//! [`esc`]; pages load one stylesheet and one script from `/dashboard/assets/`
//! and carry no inline script or style (the CSP forbids both).

use super::assets;
use baton_proto::coordinator::v1::ExecutionStatus;
use time::OffsetDateTime;
use time::macros::format_description;

/// `s` escaped for HTML text and double-quoted attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `s` percent-encoded for a URL query value or path segment.
pub(super) fn url_part(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// What the header shows about the project and who is signed in.
pub(super) struct Header<'a> {
    /// Empty on pages outside any project.
    pub(crate) project_base: &'a str,
    pub(crate) project_id: &'a str,
    /// `admin` or `member`; `None` on pages shown before sign-in.
    pub(crate) role: Option<&'a str>,
    /// Signed in with the OpenID provider, not with a key.
    pub(crate) person: bool,
    pub(crate) csrf: Option<&'a str>,
}

/// A whole page: `title` in the tab, `body` inside `<main>`.
pub(super) fn page(title: &str, header: &Header<'_>, body: &str) -> String {
    let csrf_meta =
        header.csrf.map(|t| format!(r#"<meta name="baton-csrf" content="{}">"#, esc(t))).unwrap_or_default();
    let who = match (header.role, header.csrf) {
        (Some(role), Some(csrf)) => format!(
            r#"<span class="who">{}</span>
<form method="post" action="{}/sign-out" class="sign-out"><input type="hidden" name="csrf" value="{}"><button type="submit">Sign out</button></form>"#,
            if header.person {
                format!("Signed in with your organization's account as <strong>{}</strong>", esc(role))
            } else {
                format!("Signed in with a{} <strong>{}</strong> key", if role == "admin" { "n" } else { "" }, esc(role))
            },
            esc(header.project_base),
            esc(csrf),
        ),
        _ => String::new(),
    };
    // The audit log is for the project's admins (the coordinator decides; the link only follows it).
    let audit = if header.role == Some("admin") {
        format!(r#" <a href="{}/audit-log">Audit log</a>"#, esc(header.project_base))
    } else {
        String::new()
    };
    let project = if header.project_base.is_empty() {
        String::new()
    } else {
        format!(
            r#"<nav aria-label="Project" class="sections"><a href="{}/tool-executions">Tool Executions</a>{audit}</nav>
<span class="project" title="Project ID">Project <code>{}</code></span>"#,
            esc(header.project_base),
            esc(header.project_id),
        )
    };
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
{csrf_meta}
<title>{title} · Baton</title>
<link rel="stylesheet" href="{css}">
<script src="{js}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<span class="brand">Baton</span>
{project}
<span class="grow"></span>
{who}
</header>
<main id="main" tabindex="-1">
{body}
</main>
</body>
</html>
"##,
        title = esc(title),
        css = assets::url("dashboard.css"),
        js = assets::url("dashboard.js"),
    )
}

/// A status as colour and text (the colour is never the only cue).
pub(super) fn status_badge(status: ExecutionStatus) -> String {
    let name = status.name();
    let label = match status {
        ExecutionStatus::Pending => "Pending",
        ExecutionStatus::Working => "Running",
        ExecutionStatus::InputRequired => "Needs input",
        ExecutionStatus::Completed => "Completed",
        ExecutionStatus::Failed => "Failed",
        ExecutionStatus::Cancelled => "Cancelled",
        ExecutionStatus::Unspecified => "Unknown",
    };
    format!(r#"<span class="status status-{name}" data-status="{name}">{label}</span>"#)
}

/// `2026-11-30 15:11:03 UTC`.
pub(super) fn absolute(ms: i64) -> String {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| "unknown time".to_owned())
}

/// `3 min ago`, `in 2 h`, `just now`.
pub(super) fn relative(ms: i64, now_ms: i64) -> String {
    let delta = now_ms.saturating_sub(ms);
    let secs = delta.unsigned_abs() / 1000;
    let amount = match secs {
        0..5 => return "just now".to_owned(),
        5..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    };
    if delta >= 0 { format!("{amount} ago") } else { format!("in {amount}") }
}

/// A time shown both ways; the script keeps the relative part current.
pub(super) fn time(ms: i64, now_ms: i64) -> String {
    format!(
        r#"<time datetime="{iso}" data-ms="{ms}"><span class="rel">{rel}</span> <span class="abs">{abs}</span></time>"#,
        iso = crate::json::rfc3339(ms).as_str().unwrap_or_default(),
        rel = relative(ms, now_ms),
        abs = absolute(ms),
    )
}

pub(super) fn opt_time(ms: Option<i64>, now_ms: i64) -> String {
    ms.map(|ms| time(ms, now_ms)).unwrap_or_else(|| r#"<span class="none">—</span>"#.to_owned())
}

/// `850 ms`, `12.4 s`, `3 min 5 s`.
pub(super) fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
        _ => format!("{} h {} min", ms / 3_600_000, (ms % 3_600_000) / 60_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_text_and_attributes() {
        assert_eq!(esc(r#"<script>"x"&'y'</script>"#), "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;");
        assert_eq!(url_part("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn times_read_both_ways() {
        assert_eq!(absolute(1_786_147_200_000), "2026-08-08 00:00:00 UTC");
        assert_eq!(relative(1_000, 2_000), "just now");
        assert_eq!(relative(0, 180_000), "3 min ago");
        assert_eq!(relative(7_200_000, 0), "in 2 h");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_400), "12.4 s");
        assert_eq!(duration(185_000), "3 min 5 s");
    }
}
