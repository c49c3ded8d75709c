import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';

/**
 * The OpenAI Agents SDK (`@openai/agents`), pointed at the gateway by base URL and key only: an
 * agent with one tool runs its loop over `POST /v1/responses` (issue 35).
 */
describe('OpenAI Agents SDK through the gateway', () => {
  let fixture: ChatFixture;
  let key: string;

  beforeAll(async () => {
    // Traces would go to OpenAI's platform, which tests cannot reach.
    setTracingDisabled(true);
    fixture = await startChatFixture();
    await fixture.connect('openai');
    key = await fixture.key();
  });
  afterAll(() => fixture.close());

  it('runs an agent that calls its tool and answers with what the tool said', async () => {
    const calls: string[] = [];
    const getWeather = tool({
      name: 'get_weather',
      description: 'Weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return 'sunny';
      },
    });
    const agent = new Agent({ name: 'weather', instructions: 'Answer with the weather.', model: 'openai/gpt-4o-mini', tools: [getWeather] });
    const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: key, baseURL: `${fixture.api.url}/v1`, useResponses: true }) });
    const result = await runner.run(agent, 'Weather in Paris?');
    expect(calls).toEqual(['sandbox']);
    expect(result.finalOutput).toContain('sunny');
    // Both turns went through the gateway's Responses endpoint to OpenAI's own, as they came.
    const sent = fixture.sandbox.received.filter((r) => r.path.endsWith('/openai/v1/responses'));
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(sent.every((r) => r.body?.store === false && r.body.previous_response_id === undefined)).toBe(true);
  });
});
