//! A CronWorkflow's next run, from its schedules as Argo reads them: robfig/cron's standard
//! parser (five fields, or `@hourly` and its kin), in the CronWorkflow's `timezone` (UTC
//! without one, the controller's local time in its image). croner follows the same rules as
//! robfig/cron for the fields Argo's CRD admits (digits, `*`, `,`, `-`, `/`, `?`): a day
//! matches its day-of-month or its day-of-week when both are restricted, both when either is
//! `*`.

use croner::Cron;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::str::FromStr;

/// One CronWorkflow as a sleeping namespace needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CronEntry {
    pub name: String,
    pub schedules: Vec<String>,
    /// An IANA zone name; empty for UTC.
    pub timezone: String,
}

/// Of CronWorkflows with their instanceid label, those a controller with `instance_id` runs.
pub fn run_by(crons: &[(Option<String>, CronEntry)], instance_id: Option<&str>) -> Vec<CronEntry> {
    crons
        .iter()
        .filter(|(label, _)| label.as_deref() == instance_id)
        .map(|(_, entry)| entry.clone())
        .collect()
}

/// The earliest run of any of `crons` after `from`: the CronWorkflow's name and the time.
/// An error says which schedule cannot be foreseen and why.
pub fn next_run(
    crons: &[CronEntry],
    from: Timestamp,
) -> Result<Option<(String, Timestamp)>, String> {
    let mut earliest: Option<(String, Timestamp)> = None;
    for cron in crons {
        let zone = zone(&cron.timezone).map_err(|e| {
            format!(
                "CronWorkflow {}'s timezone {:?}: {e}",
                cron.name, cron.timezone
            )
        })?;
        for schedule in &cron.schedules {
            let at = next(schedule, &zone, from)
                .map_err(|e| format!("CronWorkflow {}'s schedule {schedule:?}: {e}", cron.name))?;
            if earliest.as_ref().is_none_or(|(_, t)| at < *t) {
                earliest = Some((cron.name.clone(), at));
            }
        }
    }
    Ok(earliest)
}

fn zone(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|e| e.to_string())
}

/// The first time after `from` that `schedule` fires in `zone`.
fn next(schedule: &str, zone: &TimeZone, from: Timestamp) -> Result<Timestamp, String> {
    let schedule = schedule.trim();
    if schedule.starts_with("@every") {
        // robfig/cron counts `@every` from when the controller took the CronWorkflow: it
        // starts again at each wake, so no wake can be foreseen for it.
        return Err("@every counts from its controller's start, which sleeping would move".into());
    }
    // robfig/cron's `?` is its `*`; `@midnight` its `@daily`.
    let pattern = match schedule {
        "@midnight" => "@daily".to_string(),
        other => other.replace('?', "*"),
    };
    if !pattern.starts_with('@') && pattern.split_whitespace().count() != 5 {
        return Err("not five fields".into());
    }
    let cron = Cron::from_str(&pattern).map_err(|e| e.to_string())?;
    let next = cron
        .find_next_occurrence(&from.to_zoned(zone.clone()), false)
        .map_err(|e| e.to_string())?;
    Ok(next.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn entry(name: &str, schedules: &[&str], timezone: &str) -> CronEntry {
        CronEntry {
            name: name.into(),
            schedules: schedules.iter().map(|s| s.to_string()).collect(),
            timezone: timezone.into(),
        }
    }

    /// Each case's next run is what robfig/cron v3 (Argo's cron) gives for the same schedule
    /// and instant, worked out by hand from its rules.
    #[test]
    fn the_next_run_is_robfig_crons() {
        let from = "2026-12-04T10:07:30Z"; // a Friday
        let cases = [
            ("* * * * *", "", "2026-12-04T10:08:00Z"),
            ("*/15 * * * *", "", "2026-12-04T10:15:00Z"),
            ("0 9 * * *", "", "2026-12-05T09:00:00Z"),
            ("0 9 * * *", "Asia/Tokyo", "2026-12-05T00:00:00Z"),
            ("30 2 * * *", "America/New_York", "2026-12-05T07:30:00Z"),
            ("@hourly", "", "2026-12-04T11:00:00Z"),
            ("@midnight", "", "2026-12-05T00:00:00Z"),
            ("@weekly", "", "2026-12-06T00:00:00Z"),
            ("@monthly", "", "2027-01-01T00:00:00Z"),
            // Both restricted: the 1st of the month or a Monday, whichever comes first.
            ("0 0 1 * 1", "", "2026-12-07T00:00:00Z"),
            // Day-of-week `*`: the 1st only.
            ("0 0 1 * *", "", "2027-01-01T00:00:00Z"),
            ("0 0 1 * ?", "", "2027-01-01T00:00:00Z"),
            ("5-10 10 * * *", "", "2026-12-04T10:08:00Z"),
            ("0 10,12 * * 1-5", "", "2026-12-04T12:00:00Z"),
            // Sunday as 0.
            ("0 0 * * 0", "", "2026-12-06T00:00:00Z"),
        ];
        for (schedule, zone, want) in cases {
            let got = next_run(&[entry("c", &[schedule], zone)], at(from));
            assert_eq!(
                got,
                Ok(Some(("c".into(), at(want)))),
                "{schedule} in {zone:?}"
            );
        }
    }

    #[test]
    fn the_earliest_of_every_schedule_of_every_cron() {
        let crons = [
            entry("nightly", &["0 2 * * *"], ""),
            entry("twice", &["0 23 * * *", "45 10 * * *"], ""),
        ];
        let got = next_run(&crons, at("2026-12-04T10:07:30Z"));
        assert_eq!(got, Ok(Some(("twice".into(), at("2026-12-04T10:45:00Z")))));
        assert_eq!(next_run(&[], at("2026-12-04T10:07:30Z")), Ok(None));
    }

    #[test]
    fn strictly_after_from() {
        let got = next_run(
            &[entry("c", &["* * * * *"], "")],
            at("2026-12-04T10:08:00Z"),
        );
        assert_eq!(got, Ok(Some(("c".into(), at("2026-12-04T10:09:00Z")))));
    }

    #[test]
    fn what_cannot_be_foreseen_is_named() {
        let from = at("2026-12-04T10:07:30Z");
        let cases = [
            (
                entry("e", &["@every 1h"], ""),
                "CronWorkflow e's schedule \"@every 1h\": @every",
            ),
            (
                entry("z", &["* * * * *"], "Mars/Olympus"),
                "CronWorkflow z's timezone \"Mars/Olympus\"",
            ),
            (
                entry("s", &["0 0 * * * *"], ""),
                "CronWorkflow s's schedule \"0 0 * * * *\": not five fields",
            ),
            (
                entry("b", &["61 * * * *"], ""),
                "CronWorkflow b's schedule \"61 * * * *\"",
            ),
        ];
        for (cron, start) in cases {
            let error = next_run(&[cron], from).unwrap_err();
            assert!(error.starts_with(start), "{error}");
        }
    }
}
