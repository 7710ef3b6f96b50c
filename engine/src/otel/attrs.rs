//! Attribute keys of the OpenTelemetry GenAI semantic conventions, of
//! OpenInference, and of the Vercel AI SDK's `ai.*` telemetry: the
//! vocabularies agent tracing speaks.

pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The older name of `gen_ai.provider.name`, still sent by many instrumentations.
pub const GEN_AI_SYSTEM: &str = "gen_ai.system";
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";

pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
pub const INPUT_VALUE: &str = "input.value";
pub const OUTPUT_VALUE: &str = "output.value";
pub const LLM_MODEL_NAME: &str = "llm.model_name";
pub const LLM_PROVIDER: &str = "llm.provider";
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
pub const TOOL_NAME: &str = "tool.name";
pub const TOOL_CALL_ID: &str = "tool_call.id";
pub const SESSION_ID: &str = "session.id";

pub const SERVICE_NAME: &str = "service.name";

/// The AI SDK's operation: `ai.generateText` (a whole call, with its
/// steps), `ai.generateText.doGenerate` (one model request), `ai.toolCall`…
pub const AI_OPERATION_ID: &str = "ai.operationId";
pub const AI_MODEL_ID: &str = "ai.model.id";
pub const AI_RESPONSE_MODEL: &str = "ai.response.model";
pub const AI_PROMPT_MESSAGES: &str = "ai.prompt.messages";
pub const AI_RESPONSE_TEXT: &str = "ai.response.text";
pub const AI_RESPONSE_TOOL_CALLS: &str = "ai.response.toolCalls";
pub const AI_RESPONSE_FINISH_REASON: &str = "ai.response.finishReason";
pub const AI_TOOL_CALL_NAME: &str = "ai.toolCall.name";
pub const AI_TOOL_CALL_ID: &str = "ai.toolCall.id";
/// A tool call's input (`ai.toolCall.args` in SDK 4 and 5).
pub const AI_TOOL_CALL_ARGS: &str = "ai.toolCall.args";
pub const AI_TOOL_CALL_RESULT: &str = "ai.toolCall.result";
pub const AI_TELEMETRY_FUNCTION_ID: &str = "ai.telemetry.functionId";
