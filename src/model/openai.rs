//! openai
