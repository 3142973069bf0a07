export default function RootLayout({ children }) {
  return (
    <html lang="en">
      <head>
        <script src={process.env.RETICLE_DAEMON_URL + '/reticle.js'} />
      </head>
      <body>{children}</body>
    </html>
  );
}
