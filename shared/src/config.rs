//! Config plumbing shared by both binaries: one-line CLI errors (exit 2) and TOML files whose
//! errors name the file, the line and the key.
//!
//! Flow: clap (derive) → TOML (serde, explicit defaults) → one resolve-and-check step →
//! immutable config handed to the workers.

/// A config file problem: `file:line: key `a.b`: message`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", escape_controls(file))]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error(
        "{}:{line}: {}{}",
        escape_controls(file),
        shown_key(key),
        escape_controls(message)
    )]
    Parse {
        file: String,
        line: usize,
        key: Option<String>,
        message: String,
    },
    /// A problem found after parsing, by a check across keys (no line to show).
    #[error(
        "{}: {}{}",
        escape_controls(file),
        shown_key(key),
        escape_controls(message)
    )]
    Invalid {
        file: String,
        key: Option<String>,
        message: String,
    },
}

/// `s` with every control character (CR, LF, TAB, ESC, ...) written as its Rust escape (`\r`,
/// `\n`, `\t`, `\u{1b}`): the one way a value is echoed in a config error or warning, so the
/// error stays on its one line and a value cannot forge a log line of its own.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// "key `a.b`: " (the key escaped: a quoted TOML key may hold anything), or nothing.
fn shown_key(key: &Option<String>) -> String {
    key.as_deref()
        .map(|k| format!("key `{}`: ", escape_controls(k)))
        .unwrap_or_default()
}

/// Deserialize TOML text; `file` names it in errors.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        // `toml::Spanned` shows up in serde's path as a private field the user never wrote.
        let path = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        let line = inner
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(1);
        let key = (path != "." && !path.is_empty()).then_some(path);
        ConfigError::Parse {
            file: file.to_string(),
            line,
            key,
            // toml's messages may span lines ("invalid table header\nexpected `.`").
            message: inner
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(": "),
        }
    })
}

/// Parse CLI arguments; on a bad flag or value print one line naming it and exit 2.
/// `--help` and `--version` print as usual and exit 0.
pub fn parse_cli<C: clap::Parser>() -> C {
    parse_cli_from(std::env::args_os())
}

pub fn parse_cli_from<C: clap::Parser, I, A>(args: I) -> C
where
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    match C::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => exit_cli_error(C::command().get_name(), e),
    }
}

/// `--completions SHELL`: the shell's completion script for `cmd` (its flags, values and
/// subcommands, as clap knows them) on stdout.
pub fn print_completions(shell: clap_complete::Shell, mut cmd: clap::Command) {
    let name = cmd.get_name().to_string();
    // Into memory first: clap_complete panics on a failed write (`| head` closing the pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
}

/// Print a clap error as one line (or help/version in full) and exit. Every error line of
/// both binaries has one style, `NAME: message` (as `nginx:` and `ls:` do): a command-line
/// error as a config error or a failed start (`proxy: cannot listen on ...`).
pub fn exit_cli_error(name: &str, e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            std::process::exit(0)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            std::process::exit(2)
        }
        _ => {
            crate::log!("{name}: {}", one_line_error(&e));
            std::process::exit(2)
        }
    }
}

/// A clap error as the one line the binaries print: its first line, with what it announces
/// joined on. When the first line ends with ':' the items follow on indented lines (`the
/// following required arguments were not provided:\n  <URL>`); an invalid value is followed
/// by "[possible values: ...]". Either way the one line still says what is wrong and what is
/// right.
/// Without clap's own `error: ` in front: the caller puts the binary's name there.
pub fn one_line_error(e: &clap::Error) -> String {
    let mut text = e.render().to_string();
    // A value typed with a line break (or another control character) is echoed escaped, as
    // in a config file's errors: its break is not the end of the error's first line.
    for (_, v) in e.context() {
        if let clap::error::ContextValue::String(v) = v {
            if v.contains(char::is_control) {
                text = text.replace(v.as_str(), &escape_controls(v));
            }
        }
    }
    let line = first_line(&text);
    match line.strip_prefix("error: ") {
        Some(rest) => rest.to_string(),
        None => line,
    }
}

fn first_line(s: &str) -> String {
    let line = first_line_alone(s);
    // clap's "tip: a similar argument exists: '--threads'" (after an empty line) says what
    // was meant: keep it on the one line.
    match s.lines().map(str::trim).find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{line} ({tip})"),
        None => line,
    }
}

fn first_line_alone(s: &str) -> String {
    let mut lines = s.lines().skip_while(|l| l.trim().is_empty());
    let Some(first) = lines.next().map(str::trim_end) else {
        return s.trim_end().to_string();
    };
    let rest: Vec<&str> = lines
        .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if first.ends_with(':') && !rest.is_empty() {
        return format!("{first} {}", rest.join(", "));
    }
    match rest.iter().find(|l| l.starts_with("[possible values:")) {
        Some(values) => format!("{first} {values}"),
        None => first.to_string(),
    }
}

/// Print a one-line usage error, `NAME: msg`, and exit 2 (for problems found after parsing).
pub fn usage_error(name: &str, msg: impl std::fmt::Display) -> ! {
    crate::log!("{name}: {}", escape_controls(&msg.to_string()));
    std::process::exit(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Cfg {
        #[allow(dead_code)]
        listen: String,
        #[serde(default)]
        #[allow(dead_code)]
        timeouts: Timeouts,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Timeouts {
        #[serde(default, deserialize_with = "crate::units::serde_units::de_duration")]
        #[allow(dead_code)]
        connect: std::time::Duration,
    }

    #[test]
    fn bad_value_names_line_and_key() {
        let text = "listen = \"x\"\n\n[timeouts]\nconnect = \"3 fortnights\"\n";
        let err = parse_toml::<Cfg>("p.toml", text).unwrap_err().to_string();
        assert!(
            err.starts_with("p.toml:4: key `timeouts.connect`: "),
            "{err}"
        );
        assert!(err.contains("invalid duration"), "{err}");
    }

    #[test]
    fn unknown_key_and_syntax_errors_name_the_line() {
        let err = parse_toml::<Cfg>("p.toml", "listen = \"x\"\nlisen = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("p.toml:2:"), "{err}");
        assert!(err.contains("lisen"), "{err}");
        let err = parse_toml::<Cfg>("p.toml", "listen = \"x\"\n[timeouts\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("p.toml:2:"), "{err}");
    }

    #[derive(Debug, clap::Parser)]
    struct TwoArgs {
        #[allow(dead_code)]
        a: String,
        #[allow(dead_code)]
        b: String,
        #[arg(long)]
        #[allow(dead_code)]
        n: Option<u32>,
    }

    fn cli_error(args: &[&str]) -> String {
        use clap::Parser;
        let e =
            TwoArgs::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap_err();
        one_line_error(&e)
    }

    #[test]
    fn cli_errors_are_one_line_naming_the_problem() {
        let e = cli_error(&["x"]);
        assert_eq!(e, "the following required arguments were not provided: <B>");
        let e = cli_error(&[]);
        assert!(e.ends_with("not provided: <A>, <B>"), "{e}");
        let e = cli_error(&["x", "y", "--n", "z"]);
        assert!(
            !e.contains('\n') && e.contains("'z'") && e.contains("--n"),
            "{e}"
        );
        // clap's suggestion stays on the line.
        let e = cli_error(&["x", "y", "--nn", "1"]);
        assert_eq!(
            e,
            "unexpected argument '--nn' found (tip: a similar argument exists: '--n')"
        );
    }
}
