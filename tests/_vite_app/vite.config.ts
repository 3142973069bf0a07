import { defineConfig } from "vite";

export default defineConfig({ clearScreen: false, server: { hmr: false } });
