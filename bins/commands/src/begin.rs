//! `bsub -b [[[YYYY:][MM:]DD:]hh:]mm`: the time before which a job is not dispatched.
//!
//! LSF's rules: at least `hh:mm`; three fields are `DD:hh:mm`, four
//! `MM:DD:hh:mm`, five `YYYY:MM:DD:hh:mm`; year from 1970, month 1–12, day 1–31,
//! hour 0–23, minute 0–59. Without a year the time is the next one matching
//! the fields (today or tomorrow for `hh:mm`, this month or a later one for
//! `DD:hh:mm`, this year or a later one for `MM:DD:hh:mm`); with a year it is
//! that exact time, even in the past (the job is then dispatchable at once).
//! Times are local, in the time zone of `TZ` or `/etc/localtime`.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Span, Zoned};

/// The fields of a `-b` value, checked for range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeginSpec {
    /// `YYYY`.
    pub year: Option<i16>,
    /// `MM`.
    pub month: Option<i8>,
    /// `DD`.
    pub day: Option<i8>,
    /// `hh`.
    pub hour: i8,
    /// `mm`.
    pub minute: i8,
}

/// Months searched for a `DD:hh:mm` day that exists (31 exists within 2 months).
const MONTHS_SEARCHED: i64 = 12;
/// Years searched for an `MM:DD:hh:mm` date that exists (29 February within 8 years).
const YEARS_SEARCHED: i64 = 9;

/// The message for a bad value (LSF's wording for a bad time).
pub fn bad_time(text: &str) -> String {
    format!("{text}: Bad time specification")
}

/// Parses a `-b` value.
pub fn parse_begin(text: &str) -> Result<BeginSpec, String> {
    let bad = || bad_time(text);
    let fields: Vec<&str> = text.split(':').collect();
    if !(2..=5).contains(&fields.len()) {
        return Err(bad());
    }
    let number = |field: &str, min: i64, max: i64| -> Result<i64, String> {
        if field.is_empty() || field.len() > 4 || !field.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        field.parse::<i64>().ok().filter(|n| (min..=max).contains(n)).ok_or_else(bad)
    };
    let n = fields.len();
    let minute = number(fields[n - 1], 0, 59)? as i8;
    let hour = number(fields[n - 2], 0, 23)? as i8;
    let day = if n >= 3 { Some(number(fields[n - 3], 1, 31)? as i8) } else { None };
    let month = if n >= 4 { Some(number(fields[n - 4], 1, 12)? as i8) } else { None };
    let year = if n >= 5 { Some(number(fields[n - 5], 1970, 9999)? as i16) } else { None };
    Ok(BeginSpec { year, month, day, hour, minute })
}

impl BeginSpec {
    /// The time this value names, seen at `now`: seconds since the epoch, `None`
    /// when no such date exists (30 February, or 31 April with a year).
    pub fn resolve(&self, now: &Zoned) -> Option<i64> {
        let tz = now.time_zone();
        let at = |date: Date| -> Option<Zoned> {
            DateTime::from_parts(date, jiff::civil::time(self.hour, self.minute, 0, 0))
                .to_zoned(tz.clone())
                .ok()
        };
        let future = |zoned: &Zoned| zoned.timestamp() >= now.timestamp();
        let today = now.date();
        let found = match (self.year, self.month, self.day) {
            (Some(year), Some(month), Some(day)) => Date::new(year, month, day).ok().and_then(at),
            (None, Some(month), Some(day)) => (0..YEARS_SEARCHED).find_map(|k| {
                let year = i16::try_from(i64::from(today.year()) + k).ok()?;
                Date::new(year, month, day).ok().and_then(at).filter(future)
            }),
            (None, None, Some(day)) => (0..MONTHS_SEARCHED).find_map(|k| {
                let month = today.first_of_month().checked_add(Span::new().months(k)).ok()?;
                Date::new(month.year(), month.month(), day).ok().and_then(at).filter(future)
            }),
            _ => (0..2).find_map(|k| today.checked_add(Span::new().days(k)).ok().and_then(at).filter(future)),
        };
        found.map(|zoned| zoned.timestamp().as_second())
    }
}

/// `-b`'s value as seconds since the epoch, seen now in the local time zone.
pub fn begin_time(text: &str, now: &Zoned) -> Result<i64, String> {
    parse_begin(text)?.resolve(now).ok_or_else(|| bad_time(text))
}

/// A time as `ctime` prints it (`Fri Nov 19 13:00:00 2027`), for LSF's
/// `Job will be scheduled after ...` line.
pub fn ctime(seconds: i64, tz: &TimeZone) -> String {
    match jiff::Timestamp::from_second(seconds) {
        Ok(ts) => ts.to_zoned(tz.clone()).strftime("%a %b %e %H:%M:%S %Y").to_string(),
        Err(_) => seconds.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Zoned {
        format!("{text}[UTC]").parse().expect("valid zoned time")
    }

    fn at(text: &str, now: &str) -> Option<i64> {
        parse_begin(text).expect("valid").resolve(&utc(now))
    }

    fn seconds(text: &str) -> i64 {
        utc(text).timestamp().as_second()
    }

    // Goal: the fields are read right to left with LSF's ranges; one field, six
    // fields, junk and out-of-range numbers are refused.
    #[test]
    fn fields_and_ranges() {
        assert_eq!(
            parse_begin("20:00"),
            Ok(BeginSpec { year: None, month: None, day: None, hour: 20, minute: 0 })
        );
        assert_eq!(
            parse_begin("2027:3:4:05:06"),
            Ok(BeginSpec { year: Some(2027), month: Some(3), day: Some(4), hour: 5, minute: 6 })
        );
        for bad in [
            "",
            "20",
            "24:00",
            "12:60",
            "0:12:00",
            "13:01:12:00",
            "1969:1:1:0:0",
            "1:2:3:4:5:6",
            "a:b",
            "1:-2",
            "12:",
        ] {
            assert_eq!(parse_begin(bad), Err(format!("{bad}: Bad time specification")), "{bad}");
        }
    }

    // Goal: without a year the next matching time is chosen; with one, the exact
    // time even in the past; impossible dates are refused.
    #[test]
    fn next_matching_time() {
        let now = "2027-01-31T12:00:00";
        assert_eq!(at("13:30", now), Some(seconds("2027-01-31T13:30:00")));
        assert_eq!(at("11:30", now), Some(seconds("2027-02-01T11:30:00")));
        assert_eq!(at("12:00", now), Some(seconds("2027-01-31T12:00:00")));
        assert_eq!(at("30:08:00", now), Some(seconds("2027-03-30T08:00:00")));
        assert_eq!(at("31:13:00", now), Some(seconds("2027-01-31T13:00:00")));
        assert_eq!(at("1:15:08:00", now), Some(seconds("2028-01-15T08:00:00")));
        assert_eq!(at("2:29:00:00", now), Some(seconds("2028-02-29T00:00:00")));
        assert_eq!(at("2020:1:1:00:00", now), Some(seconds("2020-01-01T00:00:00")));
        assert_eq!(at("2027:2:30:00:00", now), None);
        assert_eq!(begin_time("2:30:00:00", &utc(now)), Err("2:30:00:00: Bad time specification".to_owned()));
    }

    // Goal: the confirmation line uses ctime's layout.
    #[test]
    fn ctime_layout() {
        assert_eq!(ctime(seconds("2027-11-05T13:00:00"), &TimeZone::UTC), "Fri Nov  5 13:00:00 2027");
    }
}
