//! Status webhooks as the server asks for them: a project's subscriptions
//! and secrets, a run's deliveries, and the check that a run's own hook can
//! be signed. Sending is the worker's (see `webhooks_worker`).
//!
//! **Secrets.** Each subscription has its own secret, shown once when it is
//! created or rotated. A run's own `on_status_change` is signed with its
//! project's *run webhook secret* (one per project, created and rotated by
//! `POST /api/webhooks/secret`, shown once): a run is created by an
//! operator, who should not mint or see secrets, and a receiver serving
//! many runs verifies them all with one key. A run with a hook in a project
//! without that secret is refused with the way to create it. A rotation
//! keeps the previous secret signing (a second `v1=` in the header) for a
//! grace period the caller chooses (default a day; 0 revokes it at once,
//! for a leaked secret).
//!
//! Who may do what is the server's decision; these check their inputs and
//! keep the records (with an audit entry, never the secret).

use chrono::{DateTime, Duration, Utc};

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::limits::{
    check_chars, MAX_ID_CHARS, MAX_WEBHOOKS_PER_PROJECT, MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOK_URL_CHARS,
};
use crate::model::{
    statuses_problem, Actor, CreatedWebhook, DeliveryPage, NewWebhook, OnStatusChange, ShownSecret, Webhook,
    WebhookPage,
};
use crate::runtime::now;

/// How long a rotated secret keeps signing when the caller does not say.
pub const DEFAULT_ROTATION_GRACE_S: u64 = 24 * 3600;
/// The longest a rotated secret may keep signing.
pub const MAX_ROTATION_GRACE_S: u64 = 7 * 24 * 3600;

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::Invalid(msg.into())
}

fn not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("webhook `{}`", id.chars().take(MAX_ID_CHARS).collect::<String>()))
}

/// Until when a secret rotated at `at` keeps signing, with `grace_s` (default a day).
fn grace_until(at: DateTime<Utc>, grace_s: Option<u64>) -> Result<DateTime<Utc>> {
    let s = grace_s.unwrap_or(DEFAULT_ROTATION_GRACE_S);
    if s > MAX_ROTATION_GRACE_S {
        return Err(invalid(format!("keep_previous_s must be at most {MAX_ROTATION_GRACE_S} (7 days), not {s}")));
    }
    Ok(at + Duration::seconds(s as i64))
}

fn shown(secret: String, rotated: bool, until: DateTime<Utc>, at: DateTime<Utc>) -> ShownSecret {
    ShownSecret { secret, previous_valid_until: (rotated && until > at).then_some(until) }
}

impl Engine {
    /// A run's own hook can be sent: its URL and statuses were checked with
    /// the request (`runtime::create`); here, that the project has a run
    /// webhook secret to sign it with.
    pub(super) async fn check_hook_secret(&self, project: &str, hook: Option<&OnStatusChange>) -> Result<()> {
        if hook.is_none() || self.rt.store.webhooks().run_secret(project).await?.is_some() {
            return Ok(());
        }
        Err(invalid(format!(
            "on_status_change: project `{project}` has no run webhook secret to sign the requests with; an admin of \
             the project creates it with POST /api/webhooks/secret (it is shown once), then runs may carry \
             on_status_change"
        )))
    }

    /// Starts the worker that sends status webhooks (see
    /// `webhooks_worker`); the server calls it once at start. It also sends
    /// what an earlier process left in the outbox.
    pub fn start_webhooks(&self) -> tokio::task::JoinHandle<()> {
        super::webhooks_worker::start(self.rt.clone())
    }
}

impl Webhooks<'_> {
    /// Creates or rotates `project`'s run webhook secret; the new secret is
    /// in this answer only, with whether one was replaced. The previous one
    /// keeps signing for `grace_s` seconds (default a day; 0: not at all).
    pub async fn rotate_run_webhook_secret(
        self,
        project: &str,
        grace_s: Option<u64>,
        by: &Actor,
    ) -> Result<(ShownSecret, bool)> {
        let at = now();
        let until = grace_until(at, grace_s)?;
        let secret = crate::net::new_secret();
        let rotated = self.rt.store.webhooks().put_run_secret(project, &secret, at, until).await?;
        let action = if rotated { "rotated the run webhook secret" } else { "created the run webhook secret" };
        self.identity().audit(Some(project), by, action, None, None).await;
        Ok((shown(secret, rotated, until, at), rotated))
    }

    /// Subscribes `req.url` to every run of `project`; the new secret is in
    /// this answer only.
    pub async fn create_webhook(self, project: &str, req: NewWebhook, by: &Actor) -> Result<CreatedWebhook> {
        check_chars("url", &req.url, MAX_WEBHOOK_URL_CHARS).map_err(invalid)?;
        crate::net::check_url(&req.url, self.rt.config.allow_private_networks)
            .map_err(|e| invalid(format!("url: {e}")))?;
        if let Some(problem) = statuses_problem(req.statuses.as_deref()) {
            return Err(invalid(problem));
        }
        if let Some(d) = &req.description {
            check_chars("description", d, MAX_WEBHOOK_DESCRIPTION_CHARS).map_err(invalid)?;
        }
        let description = req.description.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty());
        let webhook = Webhook {
            id: format!("wh_{}", uuid::Uuid::now_v7().simple()),
            project: project.to_owned(),
            url: req.url,
            statuses: req.statuses,
            description,
            created_at: now(),
            created_by: Some(by.clone()),
            secret_rotated_at: None,
        };
        let secret = crate::net::new_secret();
        if !self.rt.store.webhooks().insert_webhook(&webhook, &secret, MAX_WEBHOOKS_PER_PROJECT).await? {
            return Err(EngineError::Conflict(format!(
                "project `{project}` has {MAX_WEBHOOKS_PER_PROJECT} webhooks, the most allowed; delete one first"
            )));
        }
        self.identity()
            .audit(Some(project), by, "created a webhook", Some(&webhook.id), Some(webhook.url.clone()))
            .await;
        Ok(CreatedWebhook { webhook, secret: ShownSecret { secret, previous_valid_until: None } })
    }

    /// A page of `project`'s subscriptions, newest first.
    pub async fn list(self, project: &str, offset: u32, limit: u32) -> Result<WebhookPage> {
        let mut webhooks = self.rt.store.webhooks().webhooks(project, offset, limit.saturating_add(1)).await?;
        let more = webhooks.len() > limit as usize;
        webhooks.truncate(limit as usize);
        let next_offset = more.then(|| offset.saturating_add(limit));
        Ok(WebhookPage { webhooks, next_offset })
    }

    /// Subscription `id` (any project: the server checks the caller may see it).
    pub async fn webhook(self, id: &str) -> Result<Webhook> {
        if id.chars().count() > MAX_ID_CHARS {
            return Err(not_found(id));
        }
        self.rt.store.webhooks().webhook(id).await?.ok_or_else(|| not_found(id))
    }

    /// Deletes subscription `id`; its deliveries not sent yet are given up.
    pub async fn delete_webhook(self, id: &str, by: &Actor) -> Result<Webhook> {
        let webhook = self.webhooks().webhook(id).await?;
        let why = "not sent: the webhook was deleted";
        if !self.rt.store.webhooks().delete_webhook(id, why, now()).await? {
            return Err(not_found(id));
        }
        self.identity()
            .audit(Some(&webhook.project), by, "deleted a webhook", Some(id), Some(webhook.url.clone()))
            .await;
        Ok(webhook)
    }

    /// A new secret for subscription `id`, in this answer only (see
    /// [`Webhooks::rotate_run_webhook_secret`] for `grace_s`).
    pub async fn rotate_webhook_secret(self, id: &str, grace_s: Option<u64>, by: &Actor) -> Result<ShownSecret> {
        let webhook = self.webhooks().webhook(id).await?;
        let at = now();
        let until = grace_until(at, grace_s)?;
        let secret = crate::net::new_secret();
        if !self.rt.store.webhooks().rotate_webhook_secret(id, &secret, at, until).await? {
            return Err(not_found(id));
        }
        self.identity().audit(Some(&webhook.project), by, "rotated a webhook secret", Some(id), None).await;
        Ok(shown(secret, true, until, at))
    }

    /// A page of run `id`'s deliveries, newest change first, each with its
    /// newest attempts.
    pub async fn run_deliveries(self, id: &str, offset: u32, limit: u32) -> Result<DeliveryPage> {
        self.runs().run_head(id).await?;
        let shown = crate::model::limits::MAX_SHOWN_ATTEMPTS;
        let mut deliveries =
            self.rt.store.webhooks().run_deliveries(id, offset, limit.saturating_add(1), shown).await?;
        let more = deliveries.len() > limit as usize;
        deliveries.truncate(limit as usize);
        Ok(DeliveryPage { deliveries, next_offset: more.then(|| offset.saturating_add(limit)) })
    }
}

crate::engine::facade_group!(Webhooks, webhooks, "A project's webhooks and their deliveries.");
