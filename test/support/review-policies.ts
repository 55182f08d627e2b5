// Two policies the policy-review tests compare: the active one and a tighter candidate.
export const ACTIVE = `version: 1
network:
  rules:
    - name: api
      endpoints:
        - { host: api.example.com, port: 443, protocol: https }
    - name: web
      endpoints:
        - host: web.example.com
          port: 80
          protocol: http
          rules: [{ methods: [GET], paths: ["/docs/**"] }]
`;
export const TIGHTER = `version: 1
network:
  rules:
    - name: web
      endpoints:
        - host: web.example.com
          port: 80
          protocol: http
          rules: [{ methods: [GET, POST], paths: ["/docs/**"] }]
  deny:
    - host: "*.evil.test"
`;
