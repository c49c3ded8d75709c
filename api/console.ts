import Router from '@koa/router';
import { presentProviderKinds } from '../core/providers/kinds';
import type { GatewayState } from './context';

/**
 * Catalog paths the web console reads. The provider-kind catalog is public product data (no
 * organization's configuration), so it needs no credential.
 */
export function consoleRouter(): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/console' });
  router.get('/providers/kinds', (ctx) => {
    ctx.body = presentProviderKinds();
  });
  return router;
}
