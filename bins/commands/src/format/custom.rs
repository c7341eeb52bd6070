//! The custom layouts of `bjobs`:
//! - **`-o "field[:[-][width][:unit]] ... [delimiter='c']"`**: LSF 9+'s
//!   custom format over the fields of [`FIELDS`] (LSF's names, aliases and
//!   recommended widths); `-` stands for an empty value; a width cuts the
//!   value (a job name keeps its end behind `*`), `-width` right-aligns,
//!   a unit (`KB` `MB` `GB` `TB`) applies to memory fields.
//! - **`-o ... -json`**: LSF's JSON object `{"COMMAND":"bjobs","JOBS":N,
//!   "RECORDS":[{...}]}`, keyed by the fields' upper-case headers, every value
//!   a string, `""` where the columns print `-`; a named job that is not found
//!   is an error record `{"ERROR":"Job <N> is not found"}` after the jobs, and
//!   `JOBS` counts every record.

use jiff::tz::TimeZone;
use lava_batch_wire::JobInfo;

use super::{MemUnit, Style, cut, short_time, truncate_star};
use crate::fields::{self, FIELDS, FieldDef};

/// What a field's value may depend on besides the job.
#[derive(Clone, Copy, Debug)]
pub struct CellContext<'a> {
    /// The switches of the listing.
    pub style: &'a Style,
    /// The time zone of the times.
    pub tz: &'a TimeZone,
    /// The unit of a memory field (`max_mem:10:MB`), else LSF's automatic one.
    pub unit: Option<MemUnit>,
}

/// A time of `-o`: `Nov  5 22:44`, empty for none.
pub(crate) fn custom_time(seconds: i64, tz: &TimeZone) -> String {
    if seconds == 0 { String::new() } else { short_time(seconds, tz) }
}

/// The widest column `-o` allows (LSF's).
pub const WIDTH_MAX: usize = 4096;

/// One column of `-o`.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The field.
    pub field: &'static FieldDef,
    /// A fixed width (`stat:5`), else as wide as the widest value.
    pub width: Option<usize>,
    /// `stat:-5`: right-justified.
    pub right: bool,
    /// `max_mem::GB`: the unit of a memory field.
    pub unit: Option<MemUnit>,
}

/// A parsed `-o` specification.
#[derive(Debug, Clone)]
pub struct CustomFormat {
    /// Columns in order.
    pub columns: Vec<Column>,
    /// `delimiter='c'`: columns joined by it, unpadded.
    pub delimiter: Option<String>,
}

/// Parses `-o "field[:[-][width][:unit]] ... [delimiter='c']"`.
pub fn parse_custom(spec: &str) -> Result<CustomFormat, String> {
    let mut text = spec.to_owned();
    let mut delimiter = None;
    if let Some(start) = text.find("delimiter=") {
        let rest = &text[start + "delimiter=".len()..];
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"');
        let (value, consumed) = match quote {
            Some(q) => {
                let end =
                    rest[1..].find(q).ok_or_else(|| format!("{spec}: unbalanced quote after delimiter="))?;
                (rest[1..1 + end].to_owned(), end + 2)
            }
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (rest[..end].to_owned(), end)
            }
        };
        delimiter = Some(value);
        text.replace_range(start..start + "delimiter=".len() + consumed, " ");
    }
    let mut columns = Vec::new();
    for token in text.split_whitespace() {
        match token.split_once(':') {
            // `all[:width]`: every field, each with that width (LSF 10.1 FP14).
            Some((all, width)) if all.eq_ignore_ascii_case("all") => {
                for field in FIELDS {
                    columns.push(parse_column(&format!("{}:{width}", field.names[0]))?);
                }
            }
            None if token.eq_ignore_ascii_case("all") => {
                columns.extend(FIELDS.iter().map(|field| Column {
                    field,
                    width: None,
                    right: false,
                    unit: None,
                }));
            }
            _ => columns.push(parse_column(token)?),
        }
    }
    if columns.is_empty() {
        return Err(format!("{spec}: no field in the output format"));
    }
    Ok(CustomFormat { columns, delimiter })
}

fn parse_column(token: &str) -> Result<Column, String> {
    let mut parts = token.splitn(3, ':');
    let name = parts.next().unwrap_or_default();
    let field =
        fields::find(name).ok_or_else(|| format!("{name}: Illegal field name in the output format"))?;
    let (width, right) = match parts.next() {
        None => (None, false),
        Some(width) => {
            let (right, digits) = match width.strip_prefix('-') {
                Some(digits) => (true, digits),
                None => (false, width),
            };
            // `field:` is LSF's recommended width (none for the few fields
            // without one); a width is 1 to 4096, as in LSF.
            let width = if digits.is_empty() {
                Some(field.width).filter(|width| *width > 0)
            } else {
                Some(
                    digits
                        .parse::<usize>()
                        .ok()
                        .filter(|w| (1..=WIDTH_MAX).contains(w))
                        .ok_or_else(|| format!("{token}: Illegal width in the output format"))?,
                )
            };
            (width, right)
        }
    };
    let unit = match parts.next() {
        None => None,
        Some(_) if !field.memory => {
            return Err(format!("{token}: A unit prefix is only allowed for memory fields"));
        }
        Some(unit) => Some(
            MemUnit::parse(unit)
                .ok_or_else(|| format!("{token}: Illegal unit prefix in the output format"))?,
        ),
    };
    Ok(Column { field, width, right, unit })
}

fn cell_value(column: &Column, job: &JobInfo, style: &Style, tz: &TimeZone) -> String {
    (column.field.value)(job, &CellContext { style, tz, unit: column.unit })
}

/// The `-o` layout: `-` for a value the job does not have.
pub fn custom(jobs: &[JobInfo], format: &CustomFormat, style: &Style, tz: &TimeZone) -> String {
    let cell = |column: &Column, text: String| {
        let text = if text.is_empty() { "-".to_owned() } else { text };
        match column.width {
            Some(width) if column.field.names[0] == "job_name" => truncate_star(&text, width).into_owned(),
            Some(width) => cut(&text, width),
            None => text,
        }
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    if style.header && !jobs.is_empty() {
        let header = |column: &Column| {
            let header = column.field.header();
            column.width.map_or_else(|| header.clone(), |w| cut(&header, w))
        };
        rows.push(format.columns.iter().map(header).collect());
    }
    for job in jobs {
        rows.push(format.columns.iter().map(|c| cell(c, cell_value(c, job, style, tz))).collect());
    }
    let widths: Vec<usize> = format
        .columns
        .iter()
        .enumerate()
        .map(|(idx, column)| {
            column.width.unwrap_or_else(|| rows.iter().map(|row| row[idx].chars().count()).max().unwrap_or(0))
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line = match &format.delimiter {
            Some(delimiter) => row.join(delimiter),
            None => {
                let cells: Vec<String> = row
                    .iter()
                    .zip(&format.columns)
                    .zip(&widths)
                    .map(
                        |((text, column), width)| {
                            if column.right { format!("{text:>width$}") } else { format!("{text:<width$}") }
                        },
                    )
                    .collect();
                cells.join(" ").trim_end().to_owned()
            }
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `text` as a JSON string, quotes included.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `-o ... -json` layout, LSF's: an object naming the command, the number
/// of records and one record per job, keyed by the fields' headers, every value a
/// string (`""` for none; widths do not apply), then one `ERROR` record per
/// message of `errors` (a named job that is not found).
pub fn custom_json(
    jobs: &[JobInfo],
    errors: &[String],
    format: &CustomFormat,
    style: &Style,
    tz: &TimeZone,
) -> String {
    // One record is its (key, value) pairs, in order.
    let job_records = jobs.iter().map(|job| {
        format
            .columns
            .iter()
            .map(|column| (column.field.header(), cell_value(column, job, style, tz)))
            .collect()
    });
    let error_records = errors.iter().map(|message| vec![("ERROR".to_owned(), message.clone())]);
    let records: Vec<Vec<(String, String)>> = job_records.chain(error_records).collect();
    let mut out = format!("{{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":{},\n  \"RECORDS\":[\n", records.len());
    for (record_idx, record) in records.iter().enumerate() {
        out.push_str("    {\n");
        for (field_idx, (key, value)) in record.iter().enumerate() {
            let end = if field_idx + 1 < record.len() { "," } else { "" };
            out.push_str(&format!("      \"{key}\":{}{end}\n", json_string(value)));
        }
        out.push_str(if record_idx + 1 < records.len() { "    },\n" } else { "    }\n" });
    }
    out.push_str("  ]\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fixture::{SUBMIT, check, job, utc};
    use crate::format::memory;
    use lava_batch_ll::JobStatus;
    use lava_batch_wire as wire;

    // Goal: -o prints the asked fields; widths, alignment, delimiter and
    // -noheader work; unknown fields are refused.
    #[test]
    fn custom_format() {
        let mut exited = job(12, JobStatus::Exit);
        exited.exit_code = 2;
        let jobs = vec![job(11, JobStatus::Run), exited];
        let spec = parse_custom("jobid stat exit_code").expect("valid");
        check(
            custom(&jobs, &spec, &Style::default(), &utc()),
            "JOBID STAT EXIT_CODE\n11    RUN  -\n12    EXIT 2\n",
        );
        let spec = parse_custom("stat").expect("valid");
        check(custom(&jobs, &spec, &Style { header: false, ..Style::default() }, &utc()), "RUN\nEXIT\n");
        let spec = parse_custom("jobid:-6 name:4 delimiter=','").expect("valid");
        check(custom(&jobs, &spec, &Style::default(), &utc()), "JOBID,JOB_\n11,* 30\n12,* 30\n");
        let spec = parse_custom("jobid:-6 name:4").expect("valid");
        check(custom(&jobs, &spec, &Style::default(), &utc()), " JOBID JOB_\n    11 * 30\n    12 * 30\n");
        let spec = parse_custom("id: user: submit_time").expect("valid");
        assert_eq!(spec.columns[0].width, Some(7));
        assert!(custom(&jobs, &spec, &Style::default(), &utc()).contains("Nov 25 22:44"));
        assert!(parse_custom("jobid bogus").is_err());
        assert!(parse_custom("jobid:x").is_err());
        assert!(parse_custom("").is_err());
    }

    // Goal: the LSF fields workflow tools ask for, with `-` for empty values,
    // the ` L` of an actual finish time, exit code and reason only for EXIT,
    // the pending reason only for pending jobs, array elements as `name[idx]`
    // with their index, and memory in LSF's units or the one asked for.
    #[test]
    fn custom_format_fields() {
        let mut killed = job(12, JobStatus::Exit);
        killed.exit_code = 130;
        killed.finish_reason = wire::FINISH_KILLED;
        killed.rusage.max_rss_kb = 3 * 1024;
        killed.dependency = "done(11)".to_owned();
        let mut element = job(13, JobStatus::Pend);
        element.job.array_index = 4;
        element.job_name = "arr[1-10]".to_owned();
        element.mem_limit_kb = 2 * 1024 * 1024;
        element.run_limit_s = 90;
        let jobs = vec![job(11, JobStatus::Done), killed, element];
        let spec = parse_custom(
            "jobid jobindex job_name stat exit_code exit_reason pend_reason finish_time dependency max_mem:-8:MB memlimit runtimelimit",
        )
        .expect("valid");
        check(
            custom(&jobs, &spec, &Style::default(), &utc()),
            "JOBID JOBINDEX JOB_NAME STAT EXIT_CODE EXIT_REASON                     PEND_REASON                       \
             FINISH_TIME    DEPENDENCY  MAX_MEM MEMLIMIT RUNTIMELIMIT\n\
             11    0        sleep 30 DONE -         -                               -                                 \
             Nov 25 22:44 L -                 - -        -\n\
             12    0        sleep 30 EXIT 130       TERM_OWNER: job killed by owner -                                 \
             Nov 25 22:44 L done(11)       3 MB -        -\n\
             13    4        arr[4]   PEND -         -                               New job is waiting for scheduling \
             -              -                 - 2 Gbytes 1.5\n",
        );
        // The resource limits: sizes in the field's unit (0 a limit, shown), counts as counts.
        let mut limited = job(14, JobStatus::Run);
        limited.limits = wire::ResourceLimits {
            swap_kb: Some(4 << 20),
            core_kb: Some(0),
            stack_kb: Some(8192),
            file_kb: Some(1 << 20),
            processes: Some(8),
            ..wire::ResourceLimits::default()
        };
        let spec =
            parse_custom("jobid swaplimit corelimit stacklimit:-:MB filelimit processlimit delimiter=','")
                .expect("valid");
        check(
            custom(&[limited, job(15, JobStatus::Run)], &spec, &Style::default(), &utc()),
            "JOBID,SWAPLIMIT,CORELIMIT,STACKLIMIT,FILELIMIT,PROCESSLIMIT\n\
             14,4 Gbytes,0 Kbytes,8 MB,1 G,8\n\
             15,-,-,-,-,-\n",
        );
        let style = Style { now_s: SUBMIT + 100, ..Style::default() };
        let spec = parse_custom("jobid run_time pend_time delimiter=','").expect("valid");
        check(
            custom(
                &[job(1, JobStatus::Run), job(2, JobStatus::Pend), job(3, JobStatus::Done)],
                &spec,
                &style,
                &utc(),
            ),
            "JOBID,RUN_TIME,PEND_TIME\n1,99 second(s),1\n2,0 second(s),100\n3,30 second(s),1\n",
        );
        assert_eq!(parse_custom("all").expect("valid").columns.len(), FIELDS.len());
        let all = parse_custom("all:8").expect("valid");
        assert!(all.columns.iter().all(|column| column.width == Some(8)));
        assert!(parse_custom("stat::GB").is_err(), "a unit on a field that is not memory");
        assert!(parse_custom("mem::XB").is_err(), "an unknown unit");
        assert_eq!(memory(512, None), "512 Kbytes");
        assert_eq!(memory(1536 * 1024, None), "1.5 Gbytes");
        assert_eq!(memory(1536, Some(MemUnit::Mb)), "1.5 MB");
        assert_eq!(memory(0, Some(MemUnit::Gb)), "");
    }

    // Goal: -o ... -json is LSF's object: COMMAND, JOBS, RECORDS keyed by
    // the headers, every value a string, "" where the columns print `-`,
    // widths ignored, text escaped.
    #[test]
    fn custom_json_layout() {
        let mut exited = job(12, JobStatus::Exit);
        exited.exit_code = 2;
        exited.command = "echo \"a\\b\"".to_owned();
        let spec = parse_custom("jobid stat:2 exit_code cmd").expect("valid");
        check(
            custom_json(&[job(11, JobStatus::Run), exited], &[], &spec, &Style::default(), &utc()),
            "{\n\
             \x20 \"COMMAND\":\"bjobs\",\n\
             \x20 \"JOBS\":2,\n\
             \x20 \"RECORDS\":[\n\
             \x20   {\n\
             \x20     \"JOBID\":\"11\",\n\
             \x20     \"STAT\":\"RUN\",\n\
             \x20     \"EXIT_CODE\":\"\",\n\
             \x20     \"COMMAND\":\"sleep 30\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"JOBID\":\"12\",\n\
             \x20     \"STAT\":\"EXIT\",\n\
             \x20     \"EXIT_CODE\":\"2\",\n\
             \x20     \"COMMAND\":\"echo \\\"a\\\\b\\\"\"\n\
             \x20   }\n\
             \x20 ]\n\
             }\n",
        );
        check(
            custom_json(&[], &[], &spec, &Style::default(), &utc()),
            "{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":0,\n  \"RECORDS\":[\n  ]\n}\n",
        );
    }

    // Goal: a named job that is not found is LSF's error record in -json: after the
    // jobs, with the message under ERROR alone, counted in JOBS (also when no job is found).
    #[test]
    fn custom_json_error_records() {
        let spec = parse_custom("jobid stat").expect("valid");
        let errors = ["Job <99> is not found".to_owned(), "Job <7[3]> is not found".to_owned()];
        check(
            custom_json(&[job(11, JobStatus::Run)], &errors, &spec, &Style::default(), &utc()),
            "{\n\
             \x20 \"COMMAND\":\"bjobs\",\n\
             \x20 \"JOBS\":3,\n\
             \x20 \"RECORDS\":[\n\
             \x20   {\n\
             \x20     \"JOBID\":\"11\",\n\
             \x20     \"STAT\":\"RUN\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"ERROR\":\"Job <99> is not found\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"ERROR\":\"Job <7[3]> is not found\"\n\
             \x20   }\n\
             \x20 ]\n\
             }\n",
        );
        check(
            custom_json(&[], &errors[..1], &spec, &Style::default(), &utc()),
            "{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":1,\n  \"RECORDS\":[\n    {\n      \"ERROR\":\"Job <99> is not found\"\n    }\n  ]\n}\n",
        );
    }
}
