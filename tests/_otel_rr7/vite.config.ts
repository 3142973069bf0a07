import { reactRouter } from "@react-router/dev/vite";
import { defineConfig } from "vite";

// (the tests link node_modules from tests/.otel, outside this folder: fs.strict lets Vite serve from there)
export default defineConfig({
  plugins: [reactRouter()],
  server: { host: "127.0.0.1", fs: { strict: false } },
  optimizeDeps: { exclude: ["pg"] },
  clearScreen: false,
});
