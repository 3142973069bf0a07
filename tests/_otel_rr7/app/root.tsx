import { Links, Meta, Outlet, Scripts, ScrollRestoration } from "react-router";

// The script tag where `reticle init` says it goes for React Router 7: the Layout's <head>, in development
// only (VITE_RETICLE_JS names the daemon's reticle.js; without it the page runs with no tag, as in a device).
export function Layout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <head>
        <meta charSet="utf-8" />
        <Meta />
        <Links />
        {import.meta.env.DEV && import.meta.env.VITE_RETICLE_JS ? <script src={import.meta.env.VITE_RETICLE_JS}></script> : null}
      </head>
      <body>
        {children}
        <ScrollRestoration />
        <Scripts />
      </body>
    </html>
  );
}

export default function App() {
  return <Outlet />;
}
