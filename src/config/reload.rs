//! A config read again while flotilla runs: what takes effect at once, and what waits for the
//! next restart.

use super::Config;

impl Config {
    /// `newer` as a running flotilla takes it. The settings of the process itself (its place and
    /// name in the cluster, its clients, its reconcilers, its election) keep their values from
    /// the start; the keys of those that differ are returned, for the next restart to apply.
    /// Everything else (selector, values, overrides, policy, rollout, the templates' content)
    /// takes effect at once.
    pub fn reloaded(&self, mut newer: Config) -> (Config, Vec<&'static str>) {
        let mut waiting = Vec::new();
        macro_rules! kept {
            ($($field:ident: $key:literal),* $(,)?) => {$(
                if newer.$field != self.$field {
                    waiting.push($key);
                    newer.$field = self.$field.clone();
                }
            )*};
        }
        kept!(
            templates_dir: "templates",
            namespace: "namespace",
            instance: "instance",
            field_manager: "fieldManager",
            concurrency: "concurrency",
            api_qps: "apiQps",
            api_burst: "apiBurst",
            resync_seconds: "resyncSeconds",
            leader_election: "leaderElection",
        );
        (newer, waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_settings_wait_for_a_restart_the_rest_takes_effect() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["templates", "elsewhere"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let path = dir.path().join("flotilla.yaml");
        let parse = |text: &str| Config::parse(text, &path).unwrap();
        let running = parse("selector: team=on\nconcurrency: 4\nvalues:\n  image: a\n");
        let cases = [
            (
                "selector: team=yes\nconcurrency: 4\nvalues:\n  image: b\n",
                vec![],
            ),
            ("selector: team=on\nconcurrency: 8\n", vec!["concurrency"]),
            (
                "concurrency: 4\ninstance: other\napiQps: 5\nleaderElection:\n  leaseDurationSeconds: 5\n",
                vec!["instance", "apiQps", "leaderElection"],
            ),
            ("concurrency: 4\ntemplates: elsewhere\n", vec!["templates"]),
        ];
        for (text, want) in cases {
            let (config, waiting) = running.reloaded(parse(text));
            assert_eq!(waiting, want, "{text}");
            assert_eq!(
                (config.instance.as_str(), config.concurrency, config.api_qps),
                (
                    running.instance.as_str(),
                    running.concurrency,
                    running.api_qps
                ),
                "{text}"
            );
            assert_eq!(config.templates_dir, running.templates_dir, "{text}");
            assert_eq!(config.leader_election, running.leader_election, "{text}");
        }
        let (config, _) = running.reloaded(parse("selector: team=yes\nvalues:\n  image: b\n"));
        assert_eq!(config.selector_text, "team=yes");
        assert_eq!(config.values["image"], "b");
    }
}
