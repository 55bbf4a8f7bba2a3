// The API reference at /api/docs: Swagger UI (vendored) reading /api/v1/openapi.json. A file, not an inline
// script: pages allow scripts from this site only.
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({url: root.dataset.spec, domNode: root, deepLinking: true, tryItOutEnabled: false});
});
