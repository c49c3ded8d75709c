import type { Layer } from '@koa/router';

/**
 * The template of the route a request matched (`/v1/videos/:id`), by method and path, as
 * @koa/router matched it: what the OpenTelemetry HTTP conventions call `http.route`, for the
 * server span and the HTTP server metric. Undefined when no route did (a 404, or a method the
 * path does not take). Read from the layers the router found (`ctx.matched`), not from
 * `ctx._matchedRoute`, which names the last layer that ran: a request that router-level middleware
 * refused (an unknown key: 401) would carry that middleware's pattern instead of its route.
 */
export function routeTemplateOf(ctx: { method: string }): string | undefined {
  const matched = (ctx as { matched?: ReadonlyArray<Pick<Layer, 'methods' | 'path'>> }).matched;
  if (!matched) return undefined;
  for (let i = matched.length - 1; i >= 0; i--) {
    const layer = matched[i]!;
    if (layer.methods.length > 0 && typeof layer.path === 'string' && layer.methods.includes(ctx.method)) return layer.path;
  }
  return undefined;
}
