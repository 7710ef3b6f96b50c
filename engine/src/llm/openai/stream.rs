//! A streamed HTTP answer as a [`ModelStream`].
//!
//! The stream owns the HTTP response and reads it only when polled, so the
//! runner's back-pressure reaches the socket, and dropping the stream (which
//! is what cancelling a run does) drops the response and closes the
//! connection: no background task keeps an abandoned request alive.

use std::collections::VecDeque;

use futures::{stream, StreamExt};

use super::sse::SseParser;
use super::wire::StreamChunk;
use super::{describe, Ctx};
use crate::llm::{ModelChunk, ModelError, ModelStream, ProviderFailure};

struct State {
    response: reqwest::Response,
    parser: SseParser,
    ready: VecDeque<Result<ModelChunk, ModelError>>,
    ctx: Ctx,
    /// `[DONE]` was read, the body failed, or it ended: read no more.
    ended: bool,
    /// A `finish_reason` arrived (servers that omit `[DONE]` still send it).
    finished: bool,
}

/// Reads `response` as server-sent Chat Completions chunks.
pub(super) fn sse(response: reqwest::Response, ctx: Ctx) -> ModelStream {
    let state =
        State { response, parser: SseParser::new(), ready: VecDeque::new(), ctx, ended: false, finished: false };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.ready.pop_front() {
                return Some((item, st));
            }
            if st.ended {
                return None;
            }
            match st.response.chunk().await {
                Ok(Some(bytes)) => {
                    for data in st.parser.push(&bytes) {
                        st.event(&data);
                    }
                }
                Ok(None) => {
                    if let Some(data) = st.parser.finish() {
                        st.event(&data);
                    }
                    if !st.ended && !st.finished {
                        st.fail(ProviderFailure::Protocol("the stream ended before the answer was complete".into()));
                    }
                    st.ended = true;
                }
                Err(e) => st.fail(ProviderFailure::StreamBroke(describe(e))),
            }
        }
    })
    .boxed()
}

impl State {
    fn event(&mut self, data: &str) {
        if self.ended {
            return;
        }
        if data.trim() == "[DONE]" {
            self.ended = true;
            return;
        }
        let chunk: StreamChunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                return self.fail(ProviderFailure::Protocol(format!(
                    "the provider sent an event that is not a Chat Completions chunk ({e})"
                )))
            }
        };
        let mut out = Vec::new();
        match chunk.into_chunks(&mut out) {
            Ok(()) => {
                self.finished |= out.iter().any(|c| matches!(c, ModelChunk::Finish(_)));
                self.ready.extend(out.into_iter().map(Ok));
            }
            Err(message) => self.fail(ProviderFailure::Reported { message, mid_stream: true }),
        }
    }

    fn fail(&mut self, failure: ProviderFailure) {
        self.ready.push_back(Err(ModelError::Provider(self.ctx.error(failure))));
        self.ended = true;
    }
}
