// Mounts the Scalar API reference for Gatehouse's offline API explorer.
//
// Served by server/docsui as /docs/assets/init.js. It is a file rather than an
// inline <script> so that the page's Content-Security-Policy can keep
// script-src 'self'. The OpenAPI document URL comes from the data-openapi-url
// attribute of the #app element. (Not data-spec-url: the bundle treats that
// attribute, data-spec and #api-reference as its legacy HTML API and mounts
// itself with the default, online configuration.)
//
// Scalar's defaults reach scalar.com services; every such feature is turned
// off below. The page must work without internet access and send nothing to
// third parties (the CSP blocks it anyway; these options keep the UI from
// offering features that cannot work).
(function () {
  'use strict';

  var app = document.getElementById('app');
  if (!app) {
    return;
  }
  var specURL = app.getAttribute('data-openapi-url');
  if (!specURL || !window.Scalar || typeof window.Scalar.createApiReference !== 'function') {
    app.textContent = 'The API explorer failed to load: the Scalar bundle or the spec URL is missing.';
    return;
  }

  window.Scalar.createApiReference('#app', {
    url: specURL,
    // Default fonts come from fonts.scalar.com; use the system fonts.
    withDefaultFonts: false,
    telemetry: false,
    // An undefined proxyUrl means proxy.scalar.com relays "Test Request"
    // calls; an empty one sends them straight to the (same-origin) API.
    proxyUrl: '',
    // The client button opens the document on client.scalar.com.
    hideClientButton: true,
    // The developer toolbar (shown on localhost by default) can upload the
    // document to api.scalar.com for sharing.
    showDeveloperTools: 'never',
    // Agent Scalar (AI chat) and the MCP integration talk to scalar.com and
    // are enabled by default on localhost.
    agent: { disabled: true },
    mcp: { disabled: true }
  });
})();
