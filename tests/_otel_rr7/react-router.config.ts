// React Router 7 in framework mode: server-rendered, the loader and action run in the dev server.
export default { ssr: true };
