//! The coordinator's web UI and REST API, served beside `/metrics` (see
//! `docs/operations.md`).
//!
//! | path | answer |
//! |---|---|
//! | `/` | the overview page: cluster, workers, apps and their shuffles |
//! | `/apps/{app}/shuffles/{id}` | one shuffle's page: size histogram, partitions, copies |
//! | `/api/v1/cluster` | [`view::Cluster`] |
//! | `/api/v1/workers` | a list of [`view::Worker`] |
//! | `/api/v1/apps` | a list of [`view::App`] with their shuffles' summaries |
//! | `/api/v1/apps/{app}/shuffles/{id}` | [`view::Shuffle`] |
//!
//! Read-only: it shows what the coordinator knows about apps and shuffles (ids, sizes,
//! where copies live), never shuffle data, and changes nothing. Like `/metrics` it asks
//! for no credentials, so it belongs on a port only operators reach.
//!
//! | module | concern |
//! |---|---|
//! | [`view`] | what is shown, read from the state |
//! | [`page`] | the HTML pages |

pub mod page;
pub mod view;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use super::node::Coordinator;

/// The coordinator the handlers read.
type Coord = State<Arc<Coordinator>>;

/// The UI's and the API's routes, for the metrics listener to serve.
pub fn router(coord: Arc<Coordinator>) -> Router {
    Router::new()
        .route("/", get(overview_page))
        .route("/apps/{app}/shuffles/{id}", get(shuffle_page))
        .route("/api/v1/cluster", get(cluster))
        .route("/api/v1/workers", get(workers))
        .route("/api/v1/apps", get(apps))
        .route("/api/v1/apps/{app}/shuffles/{id}", get(shuffle))
        .with_state(coord)
}

async fn overview_page(State(c): Coord) -> Response {
    html(page::overview(&view::overview(&c)))
}

async fn shuffle_page(State(c): Coord, Path((app, id)): Path<(String, u32)>) -> Response {
    match view::shuffle(&c, &app, id) {
        Some(s) => html(page::shuffle(&s)),
        None => (
            StatusCode::NOT_FOUND,
            html(format!(
                "<!doctype html><title>Not found</title><p>No shuffle {id} of app {} is \
                 registered. <a href=\"/\">Overview</a></p>",
                page::esc(&app)
            )),
        )
            .into_response(),
    }
}

async fn cluster(State(c): Coord) -> Response {
    json(&view::overview(&c).cluster)
}

async fn workers(State(c): Coord) -> Response {
    json(&view::overview(&c).workers)
}

async fn apps(State(c): Coord) -> Response {
    json(&view::overview(&c).apps)
}

async fn shuffle(State(c): Coord, Path((app, id)): Path<(String, u32)>) -> Response {
    match view::shuffle(&c, &app, id) {
        Some(s) => json(&s),
        None => not_found(&format!("no shuffle {id} of app '{app}' is registered")),
    }
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn json<T: Serialize>(v: &T) -> Response {
    match serde_json::to_string_pretty(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `404` with `{"error": why}`.
fn not_found(why: &str) -> Response {
    let body = serde_json::json!({ "error": why }).to_string();
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
