//! Users, projects, API keys, the setup link and the audit log, as the server
//! asks for them. Who may call each of these is the server's decision (it
//! knows the caller); these check their inputs and keep the records.

use chrono::Duration;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::identity;
use crate::model::{Actor, ApiKey, AuditEntry, Member, Project, Role, User};
use crate::runtime::now;
use crate::store::{Directory, UserInsert};

/// How long the first-start setup link is valid.
pub const SETUP_TOKEN_TTL: Duration = Duration::hours(1);

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::Invalid(msg.into())
}

/// Hashing is slow on purpose (argon2id): it runs off the async threads.
async fn hash(password: &str) -> Result<String> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || identity::hash_password(&password))
        .await
        .map_err(|e| EngineError::Internal(format!("password hashing stopped: {e}")))?
        .map_err(EngineError::Internal)
}

async fn verify(hash: String, password: &str) -> bool {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || identity::verify_password(&hash, &password)).await.unwrap_or(false)
}

impl Engine {
    /// The identity records (see [`Directory`]).
    pub fn directory(&self) -> &dyn Directory {
        self.rt.store.directory()
    }

    async fn insert_user(&self, name: &str, password: &str, instance_admin: bool, only_first: bool) -> Result<User> {
        identity::check_user_name(name).map_err(invalid)?;
        identity::check_password(password).map_err(invalid)?;
        let user =
            User { id: uuid::Uuid::now_v7().to_string(), name: name.to_owned(), instance_admin, created_at: now() };
        let hash = hash(password).await?;
        match self.directory().insert_user(&user, &hash, only_first).await? {
            UserInsert::Inserted => Ok(user),
            UserInsert::NameTaken => Err(EngineError::Conflict(format!("a user named `{name}` exists already"))),
            UserInsert::NotFirst => Err(EngineError::Conflict("the first user has been created already".into())),
        }
    }

    async fn insert_key(
        &self,
        name: &str,
        project: Option<&str>,
        role: Role,
        created_by: Option<String>,
        secret: &str,
    ) -> Result<ApiKey> {
        let key = ApiKey {
            id: format!("key_{}", uuid::Uuid::now_v7().simple()),
            name: name.to_owned(),
            prefix: secret.chars().take(identity::KEY_SHOWN_CHARS).collect(),
            project: project.map(str::to_owned),
            role,
            created_at: now(),
            created_by,
            last_used_at: None,
            revoked_at: None,
        };
        self.directory().insert_key(&key, &identity::digest(secret)).await?;
        Ok(key)
    }
}

/// The actor a user acts as.
pub fn user_actor(user: &User) -> Actor {
    Actor { id: format!("user:{}", user.id), name: user.name.clone() }
}

/// The actor a key acts as.
pub fn key_actor(key: &ApiKey) -> Actor {
    Actor { id: format!("key:{}", key.id), name: key.name.clone() }
}

impl Identity<'_> {
    /// Appends to the audit log; a failure is logged, never returned (the
    /// action it records has happened).
    pub async fn audit(
        self,
        project: Option<&str>,
        actor: &Actor,
        action: &str,
        target: Option<&str>,
        detail: Option<String>,
    ) {
        let entry = AuditEntry {
            seq: 0,
            project: project.map(str::to_owned),
            at: now(),
            actor: actor.clone(),
            action: action.to_owned(),
            target: target.map(str::to_owned),
            detail,
        };
        if let Err(e) = self.directory().append_audit(&entry).await {
            tracing::error!(action, error = %e, "cannot write the audit log");
        }
    }

    /// Creates a user (a member of no project until given a role; an
    /// instance admin is admin everywhere).
    pub async fn create_user(self, name: &str, password: &str, instance_admin: bool, by: &Actor) -> Result<User> {
        let user = self.insert_user(name, password, instance_admin, false).await?;
        self.identity()
            .audit(None, by, "user_created", Some(&user.name), instance_admin.then(|| "instance admin".into()))
            .await;
        Ok(user)
    }

    /// With no user in the database, a new one-time setup token valid for
    /// [`SETUP_TOKEN_TTL`] (replacing any earlier one); `None` otherwise.
    pub async fn issue_setup_token(self) -> Result<Option<String>> {
        if self.directory().user_count().await? > 0 {
            return Ok(None);
        }
        let token = identity::random_hex(24);
        self.directory().put_setup_token(&identity::digest(&token), now() + SETUP_TOKEN_TTL).await?;
        Ok(Some(token))
    }

    /// Whether the setup token would be accepted (the setup page asks first).
    pub async fn setup_token_valid(self, token: &str) -> Result<bool> {
        if token.is_empty() || token.len() > 200 || self.directory().user_count().await? > 0 {
            return Ok(false);
        }
        self.directory().setup_token_valid(&identity::digest(token), now()).await
    }

    /// Creates the first user, an instance admin, with the setup token,
    /// which is used up. Checks the name and password before the token, so a
    /// typo does not burn the link.
    pub async fn complete_setup(self, token: &str, name: &str, password: &str) -> Result<User> {
        identity::check_user_name(name).map_err(invalid)?;
        identity::check_password(password).map_err(invalid)?;
        if !self.identity().setup_token_valid(token).await? {
            return Err(EngineError::Forbidden("this setup link is invalid, used or expired".into()));
        }
        if !self.directory().take_setup_token(&identity::digest(token), now()).await? {
            return Err(EngineError::Forbidden("this setup link is invalid, used or expired".into()));
        }
        let user = self.insert_user(name, password, true, true).await?;
        let actor = user_actor(&user);
        self.identity()
            .audit(None, &actor, "user_created", Some(&user.name), Some("first admin, by the setup link".into()))
            .await;
        Ok(user)
    }

    /// Sets a user's password and ends their sessions.
    pub async fn reset_password(self, name: &str, password: &str, by: &Actor) -> Result<User> {
        identity::check_password(password).map_err(invalid)?;
        let (user, _) = self
            .directory()
            .user_by_name(name)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("user `{name}`")))?;
        let hash = hash(password).await?;
        self.directory().set_password(&user.id, &hash).await?;
        self.directory().delete_sessions_of(&user.id).await?;
        self.identity().audit(None, by, "password_reset", Some(&user.name), None).await;
        Ok(user)
    }

    /// The user whose name and password these are; `None` otherwise (as
    /// slow for an unknown name as for a wrong password).
    pub async fn check_password(self, name: &str, password: &str) -> Result<Option<User>> {
        if name.len() > 64 || password.chars().count() > 1024 {
            return Ok(None);
        }
        match self.directory().user_by_name(name).await? {
            Some((user, hash)) => Ok(verify(hash, password).await.then_some(user)),
            None => {
                verify(identity::decoy_hash().to_owned(), password).await;
                Ok(None)
            }
        }
    }

    /// Takes one sign-in attempt from each budget of `budgets` (a subject,
    /// like `account:ada` or `address:10.0.0.7`, and how many attempts it
    /// may have per `window`), all or none: `false` when one of them is
    /// spent, and then none is taken. Counted in the database, so concurrent
    /// attempts, on this server or others on the same database, never get
    /// past a limit together (see `store::SignInStore`).
    pub async fn take_sign_in_attempt(self, budgets: &[(&str, u32)], window: Duration) -> Result<bool> {
        let at = now();
        for (i, (subject, max)) in budgets.iter().enumerate() {
            if !self.directory().take_sign_in_attempt(subject, *max, at, window).await? {
                for (taken, _) in &budgets[..i] {
                    self.directory().return_sign_in_attempt(taken).await?;
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// After a successful sign-in: `clear` forgets its attempts (the
    /// account's), `give_back` returns the one taken (the address's).
    pub async fn sign_in_succeeded(self, clear: &str, give_back: &str) -> Result<()> {
        self.directory().clear_sign_in_attempts(clear).await?;
        self.directory().return_sign_in_attempt(give_back).await
    }

    /// The user named `name`; `NotFound` otherwise.
    pub async fn user_named(self, name: &str) -> Result<User> {
        let shown: String = name.chars().take(64).collect();
        if name.len() > 64 {
            return Err(EngineError::NotFound(format!("user `{shown}…`")));
        }
        let found = self.directory().user_by_name(name).await?;
        found.map(|(user, _)| user).ok_or_else(|| EngineError::NotFound(format!("user `{shown}`")))
    }

    /// Gives user `user_name` `role` in `project` (replacing any role they
    /// had), and records it.
    pub async fn set_member(self, project: &str, user_name: &str, role: Role, by: &Actor) -> Result<Member> {
        self.identity().project(project).await?;
        let user = self.identity().user_named(user_name).await?;
        self.directory().set_member(project, &user.id, role).await?;
        self.identity().audit(Some(project), by, "member_set", Some(&user.name), Some(role.to_string())).await;
        Ok(Member { user_id: user.id, user_name: user.name, role })
    }

    /// Removes user `user_name` from `project`, and records it; `NotFound`
    /// when they were not a member.
    pub async fn remove_member(self, project: &str, user_name: &str, by: &Actor) -> Result<()> {
        self.identity().project(project).await?;
        let user = self.identity().user_named(user_name).await?;
        if !self.directory().remove_member(project, &user.id).await? {
            return Err(EngineError::NotFound(format!("member `{}` of project `{project}`", user.name)));
        }
        self.identity().audit(Some(project), by, "member_removed", Some(&user.name), None).await;
        Ok(())
    }

    /// Project `name`; `NotFound` otherwise.
    pub async fn project(self, name: &str) -> Result<Project> {
        self.directory().project(name).await?.ok_or_else(|| EngineError::NotFound(format!("project `{name}`")))
    }

    /// Creates a project (with the built-in model's zero price).
    pub async fn create_project(self, name: &str, by: &Actor) -> Result<Project> {
        identity::check_project_name(name).map_err(invalid)?;
        if !self.directory().create_project(name, now()).await? {
            return Err(EngineError::Conflict(format!("a project named `{name}` exists already")));
        }
        self.identity().audit(Some(name), by, "project_created", Some(name), None).await;
        self.identity().project(name).await
    }

    /// Creates an API key of `project` (or, with `None`, an instance-admin
    /// key) and returns it with its secret, which is never shown again.
    pub async fn create_key(
        self,
        name: &str,
        project: Option<&str>,
        role: Role,
        by: &Actor,
    ) -> Result<(ApiKey, String)> {
        identity::check_key_name(name).map_err(invalid)?;
        if let Some(p) = project {
            self.identity().project(p).await?;
        }
        let secret = identity::new_key_secret();
        let key = self.insert_key(name, project, role, Some(by.name.clone()), &secret).await?;
        self.identity()
            .audit(project, by, "key_created", Some(&key.id), Some(format!("{} ({}, {})", key.name, key.prefix, role)))
            .await;
        Ok((key, secret))
    }

    /// Makes sure the key with this secret exists as an instance-admin key
    /// (`RUNLENS_BOOTSTRAP_API_KEY`); a revoked one stays revoked.
    pub async fn ensure_bootstrap_key(self, secret: &str) -> Result<ApiKey> {
        if !identity::looks_like_key(secret) {
            return Err(invalid("a bootstrap key is `rl_` followed by 64 hex digits"));
        }
        match self.directory().key_by_hash(&identity::digest(secret)).await? {
            Some(key) => Ok(key),
            None => {
                self.insert_key("bootstrap", None, Role::Admin, Some("RUNLENS_BOOTSTRAP_API_KEY".into()), secret).await
            }
        }
    }

    /// The live key with this secret (`None` when unknown or revoked); its
    /// last use is recorded at most once a minute.
    pub async fn authenticate_key(self, secret: &str) -> Result<Option<ApiKey>> {
        if !identity::looks_like_key(secret) {
            return Ok(None);
        }
        let Some(mut key) = self.directory().key_by_hash(&identity::digest(secret)).await? else { return Ok(None) };
        if key.revoked_at.is_some() {
            return Ok(None);
        }
        let at = now();
        if key.last_used_at.is_none_or(|t| at - t > Duration::minutes(1)) {
            self.directory().touch_key(&key.id, at).await?;
            key.last_used_at = Some(at);
        }
        Ok(Some(key))
    }

    /// Revokes a key; `NotFound` when there is no live key with this id.
    pub async fn revoke_key(self, id: &str, by: &Actor) -> Result<ApiKey> {
        let key = self.directory().key(id).await?.ok_or_else(|| EngineError::NotFound(format!("key `{id}`")))?;
        if !self.directory().revoke_key(id, now()).await? {
            return Err(EngineError::Conflict(format!("key `{id}` is revoked already")));
        }
        self.identity()
            .audit(
                key.project.as_deref(),
                by,
                "key_revoked",
                Some(&key.id),
                Some(format!("{} ({})", key.name, key.prefix)),
            )
            .await;
        Ok(self.directory().key(id).await?.unwrap_or(key))
    }
}

crate::engine::facade_group!(Identity, identity, "Users, projects, roles, keys, sessions, sign-in and the audit log.");
