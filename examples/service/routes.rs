//! The HTTP side: routes, their JSON, and errors as statuses with a JSON
//! body (`{"error": ..., "status": ...}`): a missing question or player is
//! 404, bad input (a malformed body or path, an empty text, a score out of
//! range, a bad player name) is 400, an operation the store does not support
//! is 501,
//! a retryable store condition 503, anything else 500.

use crate::backend::Backend;
use crate::model::*;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

/// The page at `/`: the top questions, refreshed every second, a vote
/// button on each and a box to ask one.
pub const PAGE: &str = include_str!("page.html");

type App = State<Arc<Backend>>;
type ApiResult<T> = Result<T, ApiError>;

/// Every route of the service.
pub fn router(backend: Arc<Backend>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/questions", post(ask))
        .route("/questions/top", get(top_questions))
        .route("/questions/{id}", get(question))
        .route("/questions/{id}/vote", post(vote))
        .route("/game/scores", post(submit))
        .route("/game/top", get(game_top))
        .route("/game/players/{player}", get(player))
        .route("/game/players/{player}/around", get(around))
        .route("/metrics", get(metrics))
        .route("/probe", get(probe))
        .route("/probe/reset", post(probe_reset))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .with_state(backend)
}

/// `?n=` of the list routes (default 10, at most [`MAX_LIST`]).
#[derive(Deserialize)]
struct Count {
    n: Option<u64>,
    k: Option<u64>,
}

impl Count {
    fn get(q: Result<Query<Count>, QueryRejection>, default: u64) -> ApiResult<(u64, u64)> {
        let Query(c) = q.map_err(ApiError::bad)?;
        let (n, k) = (c.n.unwrap_or(default), c.k.unwrap_or(default));
        if n > MAX_LIST || k > MAX_LIST {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("n and k are at most {MAX_LIST}"),
            ));
        }
        Ok((n, k))
    }
}

async fn ask(
    State(b): App,
    body: Result<Json<Ask>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<QuestionView>)> {
    let Json(ask) = body.map_err(ApiError::bad)?;
    let text = ask.text.trim();
    if text.is_empty() || text.len() > MAX_TEXT {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("a question's text is 1 to {MAX_TEXT} bytes"),
        ));
    }
    Ok((StatusCode::CREATED, Json(b.ask(text.to_owned()).await?)))
}

async fn vote(State(b): App, id: Result<Path<u64>, PathRejection>) -> ApiResult<Json<VoteAck>> {
    let Path(id) = id.map_err(ApiError::bad)?;
    b.vote(id).await?;
    Ok(Json(VoteAck { id, voted: true }))
}

#[derive(serde::Serialize)]
struct VoteAck {
    id: u64,
    voted: bool,
}

async fn question(
    State(b): App,
    id: Result<Path<u64>, PathRejection>,
) -> ApiResult<Json<QuestionView>> {
    let Path(id) = id.map_err(ApiError::bad)?;
    Ok(Json(b.question(id).await?))
}

async fn top_questions(
    State(b): App,
    q: Result<Query<Count>, QueryRejection>,
) -> ApiResult<Json<Vec<QuestionView>>> {
    let (n, _) = Count::get(q, 10)?;
    Ok(Json(b.top_questions(n).await?))
}

async fn submit(
    State(b): App,
    body: Result<Json<Score>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<Score>)> {
    let Json(score) = body.map_err(ApiError::bad)?;
    b.submit(score.clone()).await?;
    Ok((StatusCode::ACCEPTED, Json(score)))
}

async fn player(
    State(b): App,
    p: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<PlayerView>> {
    let Path(p) = p.map_err(ApiError::bad)?;
    match b.player(p.clone()).await? {
        Some(view) => Ok(Json(view)),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "player {p:?} is not on the board (yet: scores are applied by the queue's worker)"
            ),
        )),
    }
}

async fn around(
    State(b): App,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Count>, QueryRejection>,
) -> ApiResult<Json<Vec<PlayerView>>> {
    let Path(p) = p.map_err(ApiError::bad)?;
    let (_, k) = Count::get(q, 3)?;
    let near = b.around(p.clone(), k).await?;
    if near.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("player {p:?} is not on the board"),
        ));
    }
    Ok(Json(near))
}

async fn game_top(
    State(b): App,
    q: Result<Query<Count>, QueryRejection>,
) -> ApiResult<Json<Vec<PlayerView>>> {
    let (n, _) = Count::get(q, 10)?;
    Ok(Json(b.game_top(n).await?))
}

async fn metrics(State(b): App) -> ApiResult<Json<autoshard::StoreMetrics>> {
    Ok(Json(b.metrics().await?))
}

async fn probe(State(b): App) -> Json<ProbeView> {
    Json(b.probe.view())
}

async fn probe_reset(State(b): App) -> StatusCode {
    b.probe.reset();
    StatusCode::NO_CONTENT
}

/// An error response: the status and a JSON body that says why.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// A request axum could not parse (body, path, query): 400 whatever
    /// status axum would pick, so every bad input reads alike.
    fn bad(e: impl std::fmt::Display) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
    }
}

impl From<autoshard::Error> for ApiError {
    fn from(e: autoshard::Error) -> Self {
        use autoshard::Error as E;
        let status = match &e {
            E::NotFound { .. } => StatusCode::NOT_FOUND,
            E::InvalidName { .. } | E::InvalidValue { .. } | E::ScoreOutOfRange { .. } => {
                StatusCode::BAD_REQUEST
            }
            E::Unsupported { .. } => StatusCode::NOT_IMPLEMENTED,
            e if e.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message,
            status: self.status.as_u16(),
        };
        (self.status, Json(body)).into_response()
    }
}
