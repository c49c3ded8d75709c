import { billedUsage, outputBytes, wholeAnswerUsage } from '../../api/gateway/billed-usage';
import type { ChatBody, ChatResult, Choice } from '../../core/providers/types';
import { estimatePromptTokens } from '../../core/spend/worst-case';

/** What an answer is settled at (issue 20: a limit is a ceiling, also for answers that did not end well). */
describe('billedUsage', () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'Say hello' }] } as ChatBody;
  const prompt = estimatePromptTokens(body);

  it('takes the provider\'s usage as it is once final, even when the output looks larger', () => {
    const reported = { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 };
    expect(billedUsage(body, reported, 3_000, true)).toBe(reported);
  });

  it('estimates what nothing reported: the prompt, and a token per three bytes of output', () => {
    expect(billedUsage(body, null, 30, true)).toEqual({ prompt_tokens: prompt, completion_tokens: 10, total_tokens: prompt + 10 });
    expect(billedUsage(body, null, 31, false)).toMatchObject({ completion_tokens: 11 });
  });

  it('on an unfinished answer keeps partial counts, never below them, never above the output cap', () => {
    // Anthropic's message_start: the prompt counted, one output token so far.
    const partial = { prompt_tokens: 40, completion_tokens: 1, total_tokens: 41 };
    expect(billedUsage(body, partial, 300, false)).toEqual({ prompt_tokens: 40, completion_tokens: 100, total_tokens: 140 });
    expect(billedUsage(body, { ...partial, completion_tokens: 500 }, 300, false)).toMatchObject({ completion_tokens: 500 });
    expect(billedUsage({ ...body, max_tokens: 20 }, null, 300, false)).toMatchObject({ completion_tokens: 20 });
    expect(billedUsage({ ...body, max_completion_tokens: 20, n: 2 }, null, 300, false)).toMatchObject({ completion_tokens: 40 });
  });

  it('counts reasoning the provider reported so far on top of the visible output of an unfinished answer (issue 33)', () => {
    // Gemini's usage so far: 40 thinking tokens, 2 visible; then 300 visible bytes arrived.
    const partial = { prompt_tokens: 10, completion_tokens: 42, total_tokens: 52, completion_tokens_details: { reasoning_tokens: 40 } };
    expect(billedUsage(body, partial, 300, false)).toMatchObject({ completion_tokens: 140 });
    expect(billedUsage({ ...body, max_tokens: 50 }, partial, 300, false)).toMatchObject({ completion_tokens: 50 });
  });

  it('counts a whole answer\'s text and tool calls in UTF-8 bytes', () => {
    const choices = [
      { index: 0, message: { role: 'assistant', content: 'héllo' }, finish_reason: 'stop' },
      { index: 1, message: { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, finish_reason: 'tool_calls' },
    ] as Choice[];
    expect(choices.reduce((n, c) => n + outputBytes(c.message.content, c.message.tool_calls), 0)).toBe(6 + 1 + 7);
    // Priced on those bytes when the provider reported no usage.
    expect(wholeAnswerUsage(body, { choices, usage: null } as ChatResult)).toMatchObject({ completion_tokens: Math.ceil(14 / 3) });
  });
});
