// Swagger UI on the document this server serves. A separate file, so that
// the page needs no inline script.
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
