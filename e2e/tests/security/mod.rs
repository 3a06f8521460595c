//! Hostile input and least privilege. Every bad input gets a clear error and changes nothing;
//! flotilla's own credentials are refused what it must not do; a namespace owner cannot make
//! flotilla act outside their namespace; logs carry no token and no object bodies.
//!
//! The config and template cases run the binary without a cluster; the others run against the
//! local control plane, and prove "nothing changed" with resourceVersions and with the API
//! server's audit log of flotilla's own writes.
//!
//! The tests are registered below, in this module, so that each keeps the name CI knows it by
//! (`security::<name>`); each one's body is the function of the same name in the file of its job:
//! - `offline.rs`: bad config files and bad templates, refused before any cluster is contacted.
//! - `templates.rs`: on a live fleet, a template that breaks for each namespace in its own way;
//!   long names and control characters.
//! - `policy.rs`: templates asking for what flotilla must not stamp, a namespace whose first
//!   render fails that way, a reserved namespace the selector matches, overrides beyond the
//!   declared keys and bounds.
//! - `credentials.rs`: what flotilla's own token is refused, and the Roles it stamps.
//! - `admission.rs`: with the admission policy installed, a stolen token is refused what RBAC
//!   alone would let it write by name.
//! - `writes.rs`: its token writes only the names the templates render, nowhere else.
//! - `logs.rs`: structured logs without tokens or object bodies.
//! - `tenants.rs`: a namespace owner cannot make flotilla act outside their namespace.
//! - `helpers.rs`: what they share.

mod admission;
mod credentials;
mod helpers;
mod logs;
mod offline;
mod policy;
mod templates;
mod tenants;
mod writes;

// ---- Offline input checks: the binary without a cluster (offline.rs). ----

#[test]
fn bad_config_stops_run_and_check_with_exit_2_naming_file_line_and_key() {
    offline::bad_config_stops_run_and_check_with_exit_2_naming_file_line_and_key();
}

#[test]
fn bad_templates_are_reported_by_check_render_and_run_with_file_and_line() {
    offline::bad_templates_are_reported_by_check_render_and_run_with_file_and_line();
}

#[test]
fn render_refuses_a_namespace_name_that_is_not_a_dns_label() {
    offline::render_refuses_a_namespace_name_that_is_not_a_dns_label();
}

// ---- Templates on a live fleet (templates.rs). ----

#[tokio::test]
async fn a_template_that_breaks_keeps_every_namespace_as_it_was() {
    templates::a_template_that_breaks_keeps_every_namespace_as_it_was().await;
}

#[tokio::test]
async fn long_names_and_control_characters_are_stamped_valid_and_as_written() {
    templates::long_names_and_control_characters_are_stamped_valid_and_as_written().await;
}

// ---- Policy: what flotilla refuses to stamp, and overrides beyond bounds (policy.rs). ----

#[tokio::test]
async fn policy_refuses_cluster_scoped_unlisted_and_misplaced_objects() {
    policy::policy_refuses_cluster_scoped_unlisted_and_misplaced_objects().await;
}

#[tokio::test]
async fn a_namespace_whose_first_render_fails_shows_why_and_gets_nothing() {
    policy::a_namespace_whose_first_render_fails_shows_why_and_gets_nothing().await;
}

#[tokio::test]
async fn a_reserved_namespace_is_no_target_even_when_the_selector_matches() {
    policy::a_reserved_namespace_is_no_target_even_when_the_selector_matches().await;
}

#[tokio::test]
async fn overrides_beyond_the_declared_keys_and_bounds_change_nothing() {
    policy::overrides_beyond_the_declared_keys_and_bounds_change_nothing().await;
}

// ---- flotilla's own credentials and logs (credentials.rs, logs.rs). ----

#[tokio::test]
async fn flotillas_own_credentials_are_refused_what_it_must_not_do() {
    credentials::flotillas_own_credentials_are_refused_what_it_must_not_do().await;
}

#[tokio::test]
async fn a_stolen_token_is_refused_what_the_policy_bounds() {
    admission::a_stolen_token_is_refused_what_the_policy_bounds().await;
}

#[tokio::test]
async fn flotillas_token_writes_only_the_names_its_templates_render() {
    writes::flotillas_token_writes_only_the_names_its_templates_render().await;
}

#[tokio::test]
async fn a_create_never_takes_over_an_object_made_in_the_meantime() {
    writes::a_create_never_takes_over_an_object_made_in_the_meantime().await;
}

#[tokio::test]
async fn logs_are_structured_and_carry_no_token_and_no_object_bodies() {
    logs::logs_are_structured_and_carry_no_token_and_no_object_bodies().await;
}

// ---- Tenants (tenants.rs). ----

#[tokio::test]
async fn a_namespace_owner_cannot_make_flotilla_act_outside_their_namespace() {
    tenants::a_namespace_owner_cannot_make_flotilla_act_outside_their_namespace().await;
}
